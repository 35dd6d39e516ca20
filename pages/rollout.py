import streamlit as st

from ui.routing import through_app
from ui.state import current_record, index_slider
from viz.rollout import FORMULA, FORMULA_TEXT, rollout_figures

through_app()

st.title("Attention rollout")
st.markdown(
    "One layer's attention mixes the vectors of the layer below, which are already mixtures. "
    "**Attention rollout** (Abnar & Zuidema, 2020) follows the mixing down to the input words: "
    "average each layer's heads, count the residual connection as half the flow (the token "
    "keeps half of itself), and multiply the layers together."
)
st.latex(FORMULA)
st.caption(FORMULA_TEXT)
record = current_record()
if record is not None:
    st.session_state.setdefault("rollout_layer", record.num_layers - 1)  # the whole flow first
    layer = index_slider("Layer", record.num_layers, "rollout_layer")
    st.caption(f"{record.num_tokens} tokens · {record.source}. Left: what layer "
               f"{layer} attends to directly. Right: how its output traces back to the input.")
    raw, rolled = rollout_figures(record, layer)
    left, right = st.columns(2)
    left.plotly_chart(raw, key="rollout_raw")
    right.plotly_chart(rolled, key="rollout_rolled")
