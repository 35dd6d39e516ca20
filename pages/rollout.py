import streamlit as st

from ui.routing import through_app
from ui.state import current_record, index_slider
from viz.rollout import FORMULA, FORMULA_TEXT, rollout_figures
from viz.tokens import apply_token_options

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
record = current_record(apply_options=False)  # the options are applied below, with notes
if record is not None:
    view = apply_token_options(record, st.session_state.get("sb_merge_words", False),
                               st.session_state.get("sb_hide_special", False))
    for note in view.notes:
        st.info(note + " Rollout is computed on the tokens shown.")
    layer = index_slider("Layer", view.record.num_layers, "rollout_layer")
    st.caption(f"{view.record.num_tokens} tokens · {view.record.source}. Left: what layer "
               f"{layer} attends to directly. Right: how its output traces back to the input.")
    raw, rolled = rollout_figures(view.record, layer)
    left, right = st.columns(2)
    left.plotly_chart(raw, key="rollout_raw")
    right.plotly_chart(rolled, key="rollout_rolled")
