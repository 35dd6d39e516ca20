import streamlit as st

from ui import attention as inputs
from ui import charts, views
from ui.downloads import figure_downloads
from ui.routing import through_app
from ui.state import index_slider
from viz.export import safe_stem
from viz.export_figures import title_for
from viz.rollout import FORMULA, FORMULA_TEXT

through_app()

st.title("Attention rollout")
intro, picture = st.columns([1, 2], gap="medium")  # the controls beside the maps they drive
intro.markdown(
    "One layer's attention mixes the vectors of the layer below, which are already "
    "mixtures. **Attention rollout** (Abnar & Zuidema, 2020) follows the mixing down to the "
    "input words: average each layer's heads, count the residual connection as half the flow "
    "(the token keeps half of itself), and multiply the layers together."
)
intro.latex(FORMULA)
intro.caption(FORMULA_TEXT)
attention = inputs.current()
if attention is not None:
    st.session_state.setdefault("rollout_layer", attention.num_layers - 1)  # the whole flow first
    layer = index_slider("Layer", attention.num_layers, "rollout_layer", intro)
    intro.caption(f"{inputs.caption(attention)}. First: how the output of layer {layer} traces "
                  "back to the input. Under it: what the layer attends to directly (the mean of "
                  "its heads).")
    raw, rolled = views.rollout_figures(attention, layer)
    # one above the other: side by side, each had a third of the page and its labels overlapped;
    # the rolled-out map (the page's point) comes first, on the first screen
    charts.show(rolled, key="rollout_rolled", container=picture)
    charts.show(raw, key="rollout_raw", container=picture)
    figure_downloads([raw, rolled], title_for("Attention rollout", attention.tokens, layer),
                     f"{safe_stem(attention.label)}_rollout_L{layer}", "rollout_figure")
