import streamlit as st

from models.analysis.pooling import pool
from ui import analysis_cache, charts, long_inputs, long_views
from ui.downloads import export_buttons, long_export_buttons
from ui.routing import through_app
from ui.state import current_record, index_slider, sidebar_input
from viz.head_analysis import norm_heatmap
from viz.heatmap import attention_heatmap, layer_heads_grid
from viz.long_view import pooled_head_figure

through_app()


def layer_and_head(num_layers: int, num_heads: int, controls) -> tuple[int, int]:
    """The layer and head pickers (the same keys for a full trace and a long input)."""
    return (index_slider("Layer", num_layers, "maps_layer", controls),
            index_slider("Head", num_heads, "maps_head", controls))


st.title("Attention maps")
given = sidebar_input()
long = long_inputs.long_count(given.source, given.text, given.pair)
read_all = long is not None and st.toggle(**long_views.read_all_text(long), key="maps_long")
if read_all:
    overview = long_inputs.overview(given.source, given.text, given.pair)
    streamed = overview.streamed
    controls, picture = st.columns([1, 2], gap="medium")
    controls.markdown(
        f"One head over all **{streamed.num_tokens:,}** tokens. Each row is a **query** token and "
        "each column a **key** token. The whole map is shrunk to fit: a cell shows the largest "
        "weight of a block of tokens, so thin diagonals and bright columns stay visible. Below, "
        "a window of the exact weights, with the tokens. Over thousands of keys the weights are "
        "small, so the colours run from 0 to a top read from this head (the colour bar shows it).")
    layer, head = layer_and_head(streamed.num_layers, streamed.num_heads, controls)
    controls.caption(
        f"The layer's other heads are not drawn for a long input: a grid of every head of a "
        f"layer would hold {streamed.num_heads} × {streamed.num_tokens ** 2 / 1e6:.1f} million "
        "cells. Pick them one at a time with the Head slider, or see every head at once, pooled, "
        "on the All heads page.")
    weights = long_inputs.head(given.source, given.text, given.pair, layer, head)
    charts.show(pooled_head_figure(pool(weights), layer, head), key="maps_long_whole",
                container=picture)
    sliders, window = st.columns([1, 2], gap="medium")
    last = long_views.window_last(streamed.tokens)  # it starts on the diagonal at the end
    starts = (long_views.window_start("Window: first query", last, "maps_window_query", last,
                                      sliders),
              long_views.window_start("Window: first key", last, "maps_window_key", last, sliders))
    long_views.exact_window(weights, streamed.tokens, layer, head, "maps", starts, window)
    long_export_buttons(weights, overview.pooled, streamed.tokens,
                        long_inputs.label(given.source), layer, head, "maps_long_export")
else:
    record = current_record()
    if record is not None:
        controls, picture = st.columns([1, 2], gap="medium")  # the controls beside the map
        controls.markdown(
            "Each row is a **query** token and each column a **key** token. A cell shows how much "
            "the query attends to the key: every row adds up to 1. Pick a layer and a head; below, "
            "every head of that layer is drawn small on the same colour scale so you can compare "
            "them."
        )
        layer, head = layer_and_head(record.num_layers, record.num_heads, controls)
        controls.caption(f"{record.num_tokens} tokens · {record.source}")
        norm_view = controls.toggle(
            "Beside it, the norm-based view ‖α·f(x)‖", key="maps_norm",
            help="Kobayashi et al. (2020): a weight times the length of the value vector it "
                 "brings (after the head's output projection). A big weight on a key whose value "
                 "is short moves almost nothing.")
        if norm_view:
            norms = analysis_cache.norm_maps(given.source, given.text, given.pair)
            tokens = analysis_cache.model_tokens(given.source, given.text, given.pair)
            weights_column, norm_column = picture.columns(2)
            charts.show(attention_heatmap(record, layer, head), key="maps_heatmap",
                        container=weights_column)
            charts.show(norm_heatmap(tokens, norms[layer, head], layer, head),
                        key="maps_norm_heatmap", container=norm_column)
            picture.caption("The norm-based map is per model token (the sidebar's token options "
                            "do not apply to it). Compare the columns on [CLS], [SEP] or the "
                            "first token: much of the weight they get moves little.")
        else:
            charts.show(attention_heatmap(record, layer, head), key="maps_heatmap",
                        container=picture)
        export_buttons(record, layer, head, "maps_export")
        charts.show(layer_heads_grid(record, layer), key="maps_grid")
