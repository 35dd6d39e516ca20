import streamlit as st

from ui import charts
from ui.routing import through_app
from ui.state import current_record, index_slider
from viz.rollout import FORMULA, FORMULA_TEXT, rollout_figures

through_app()

st.title("Attention rollout")
intro, picture = st.columns([1, 2], gap="medium")  # the controls beside the maps they drive
intro.markdown(
    "One layer's attention mixes the vectors of the layer below, which are already mixtures. "
    "**Attention rollout** (Abnar & Zuidema, 2020) follows the mixing down to the input words: "
    "average each layer's heads, count the residual connection as half the flow (the token "
    "keeps half of itself), and multiply the layers together."
)
intro.latex(FORMULA)
intro.caption(FORMULA_TEXT)
record = current_record()
if record is not None:
    st.session_state.setdefault("rollout_layer", record.num_layers - 1)  # the whole flow first
    layer = index_slider("Layer", record.num_layers, "rollout_layer", intro)
    intro.caption(f"{record.num_tokens} tokens · {record.source}. Left: what layer {layer} "
                  "attends to directly (the mean of its heads). Right: how its output traces back "
                  "to the input.")
    raw, rolled = rollout_figures(record, layer)
    left, right = picture.columns(2)
    charts.show(raw, key="rollout_raw", container=left)
    charts.show(rolled, key="rollout_rolled", container=right)
