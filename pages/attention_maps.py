import streamlit as st

from ui import analysis_cache, charts
from ui.downloads import export_buttons
from ui.routing import through_app
from ui.state import current_record, index_slider, sidebar_input
from viz.head_analysis import norm_heatmap
from viz.heatmap import attention_heatmap, layer_heads_grid

through_app()

st.title("Attention maps")
record = current_record()
if record is not None:
    controls, picture = st.columns([1, 2], gap="medium")  # the controls beside what they drive
    controls.markdown(
        "Each row is a **query** token and each column a **key** token. A cell shows how much "
        "the query attends to the key: every row adds up to 1. Pick a layer and a head; below, "
        "every head of that layer is drawn small on the same colour scale so you can compare "
        "them."
    )
    layer = index_slider("Layer", record.num_layers, "maps_layer", controls)
    head = index_slider("Head", record.num_heads, "maps_head", controls)
    controls.caption(f"{record.num_tokens} tokens · {record.source}")
    norm_view = controls.toggle(
        "Beside it, the norm-based view ‖α·f(x)‖", key="maps_norm",
        help="Kobayashi et al. (2020): a weight times the length of the value vector it brings "
             "(after the head's output projection). A big weight on a key whose value is short "
             "moves almost nothing.")
    if norm_view:
        given = sidebar_input()
        norms = analysis_cache.norm_maps(given.source, given.text, given.pair)
        tokens = analysis_cache.model_tokens(given.source, given.text, given.pair)
        weights_column, norm_column = picture.columns(2)
        charts.show(attention_heatmap(record, layer, head), key="maps_heatmap",
                    container=weights_column)
        charts.show(norm_heatmap(tokens, norms[layer, head], layer, head),
                    key="maps_norm_heatmap", container=norm_column)
        picture.caption("The norm-based map is per model token (the sidebar's token options do "
                        "not apply to it). Compare the columns on [CLS], [SEP] or the first "
                        "token: much of the weight they get moves little.")
    else:
        charts.show(attention_heatmap(record, layer, head), key="maps_heatmap", container=picture)
    export_buttons(record, layer, head, "maps_export")
    charts.show(layer_heads_grid(record, layer), key="maps_grid")
