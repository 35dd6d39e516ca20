import streamlit as st

from ui import attention as inputs
from ui import views
from ui.charts import presentation
from ui.downloads import head_figure_downloads
from ui.routing import through_app
from ui.start import lessons_and_decks
from ui.state import index_slider

through_app()

st.title("Attention maps")
# The way into lessons and decks comes first, except in presenter mode: there the map is the
# projector's first screen, and the section follows it.
presenting = presentation().presenter
if not presenting:
    lessons_and_decks()
attention = inputs.current()
if attention is not None:
    controls, picture = st.columns([1, 2], gap="medium")  # the controls beside the map
    controls.markdown(
        "Each row is a **query** token and each column a **key** token. A cell shows how much "
        "the query attends to the key: every row adds up to 1. Pick a layer and a head; below, "
        "every head of that layer is drawn small on the same colour scale so you can compare "
        "them."
    )
    layer = index_slider("Layer", attention.num_layers, "maps_layer", controls)
    head = index_slider("Head", attention.num_heads, "maps_head", controls)
    controls.caption(inputs.caption(attention))
    if not views.exact(attention):
        controls.caption(
            "The whole map is shrunk to fit: a cell shows the largest weight of a block of "
            "tokens, so thin diagonals and bright columns stay visible. Beside it, a window of "
            "the exact weights, with the tokens. Over thousands of keys the weights are small, "
            "so the colours run from 0 to a top read from this head (the colour bar shows it).")
    norm_view = controls.toggle(
        "Beside it, the norm-based view ‖α·f(x)‖", key="maps_norm",
        help="Kobayashi et al. (2020): a weight times the length of the value vector it brings "
             "(after the head's output projection). A big weight on a key whose value is short "
             "moves almost nothing.")
    if norm_view:
        weights_column, norm_column = picture.columns(2)
        views.head_map(attention, layer, head, "maps", weights_column, half_width=True)
        views.norm_map(inputs.current(token_options=False), layer, head, "maps", norm_column)
        picture.caption("The norm-based map is per model token (the sidebar's token options do "
                        "not apply to it). Compare the columns on [CLS], [SEP] or the first "
                        "token: much of the weight they get moves little.")
    else:
        views.head_map(attention, layer, head, "maps", picture)
    views.head_exports(attention, layer, head, "maps_export")
    head_figure_downloads(attention, layer, head, "maps_figure")
if presenting:
    lessons_and_decks()
if attention is not None:
    views.layer_grid(attention, layer, "maps")
