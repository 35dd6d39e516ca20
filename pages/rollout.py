import streamlit as st

from models.analysis.rollout import record_rollout
from ui import charts, long_inputs, long_views
from ui.routing import through_app
from ui.state import current_record, index_slider, sidebar_input
from viz.rollout import FORMULA, FORMULA_TEXT, long_rollout_figures, rollout_figures

through_app()


def explain(container) -> None:
    container.markdown(
        "One layer's attention mixes the vectors of the layer below, which are already "
        "mixtures. **Attention rollout** (Abnar & Zuidema, 2020) follows the mixing down to the "
        "input words: average each layer's heads, count the residual connection as half the flow "
        "(the token keeps half of itself), and multiply the layers together."
    )
    container.latex(FORMULA)
    container.caption(FORMULA_TEXT)


st.title("Attention rollout")
given = sidebar_input()
long = long_inputs.long_count(given.source, given.text, given.pair)
read_all = long is not None and st.toggle(**long_views.read_all_text(long), key="rollout_long")
if read_all:  # the two maps get the page's width; the explanation folds away under them
    overview = long_inputs.overview(given.source, given.text, given.pair)
    streamed = overview.streamed
    st.session_state.setdefault("rollout_layer", streamed.num_layers - 1)  # the whole flow first
    controls, note = st.columns([1, 2], gap="medium")
    layer = index_slider("Layer", streamed.num_layers, "rollout_layer", controls)
    note.caption(f"All {streamed.num_tokens:,} tokens · {long_inputs.label(given.source)}. Left: "
                 f"what layer {layer} attends to directly (the mean of its heads). Right: how its "
                 "output traces back to the input. The layers' exact maps were multiplied as the "
                 "model computed them; each cell shows the largest value of a block of tokens.")
    raw, rolled = long_rollout_figures(*overview.rollout_pooled(layer), layer, streamed.tokens)
    left, right = st.columns(2, gap="medium")
    charts.show(raw, key="rollout_long_raw", container=left)
    charts.show(rolled, key="rollout_long_rolled", container=right)
    explain(st.expander("What rollout is"))
else:
    intro, picture = st.columns([1, 2], gap="medium")  # the controls beside the maps they drive
    explain(intro)
    record = current_record()
    if record is not None:
        st.session_state.setdefault("rollout_layer", record.num_layers - 1)  # the whole flow first
        layer = index_slider("Layer", record.num_layers, "rollout_layer", intro)
        intro.caption(f"{record.num_tokens} tokens · {record.source}. Left: what layer {layer} "
                      "attends to directly (the mean of its heads). Right: how its output traces "
                      "back to the input.")
        raw, rolled = rollout_figures(*record_rollout(record).exact(layer), record.tokens, layer)
        left, right = picture.columns(2)
        charts.show(raw, key="rollout_raw", container=left)
        charts.show(rolled, key="rollout_rolled", container=right)
