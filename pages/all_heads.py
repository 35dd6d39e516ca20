import streamlit as st

from models.analysis.pooling import pool
from models.analysis.thumbnails import thumbnails
from ui import long_inputs, long_views
from ui.charts import show
from ui.downloads import export_buttons, long_export_buttons
from ui.routing import through_app
from ui.state import current_record, index_slider, sidebar_input
from viz.heatmap import attention_heatmap
from viz.long_view import fit_half_width, pooled_head_figure
from viz.overview import all_heads_figure, clicked_tile

through_app()


def open_clicked_tile(num_layers: int, num_heads: int) -> None:
    """Runs before the rerun a click on the mosaic starts: the clicked tile becomes the layer and
    head of the sliders (which are not drawn yet, so they may still be set)."""
    event = st.session_state.get("all_mosaic") or {}
    points = (event.get("selection") or {}).get("points") or []
    tile = clicked_tile(points, num_layers, num_heads)
    if tile is not None:
        st.session_state["all_layer"], st.session_state["all_head"] = tile


def draw_mosaic(mosaic, controls, picture, shape) -> None:
    # a column narrower than the figure: keep the tiles (and their H labels) at the top of it
    mosaic.update_yaxes(constrain="domain", constraintoward="top")
    show(mosaic, key="all_mosaic", container=picture,
         on_select=lambda: open_clicked_tile(*shape), selection_mode="points")


st.title("All heads at once")
given = sidebar_input()
long = long_inputs.long_count(given.source, given.text, given.pair)
read_all = long is not None and st.toggle(**long_views.read_all_text(long), key="all_long")
if read_all:
    overview = long_inputs.overview(given.source, given.text, given.pair)
    streamed = overview.streamed
    controls, picture = st.columns([1, 3], gap="medium")
    controls.markdown(f"Every layer and head over all **{streamed.num_tokens:,}** tokens. Each "
                      "thumbnail shows the largest weight of each block of tokens.")
    layer = index_slider("Layer", streamed.num_layers, "all_layer", controls)
    head = index_slider("Head", streamed.num_heads, "all_head", controls)
    per_tile = controls.toggle(
        "Per-head colours", key="all_tile_scale",
        help="Over thousands of keys most weights are small, so on one 0–100 % scale many "
             "heads' patterns are faint. Turned on, each head's colours run from 0 to its own "
             "99th-percentile block: patterns show, but colours no longer compare across heads.")
    shape = (streamed.num_layers, streamed.num_heads)
    draw_mosaic(all_heads_figure(overview.thumbnails, (layer, head), per_tile), controls,
                picture, shape)
    weights = long_inputs.head(given.source, given.text, given.pair, layer, head)
    whole, window = st.columns(2, gap="medium")
    show(fit_half_width(pooled_head_figure(pool(weights), layer, head)), key="all_long_whole",
         container=whole)
    last = long_views.window_last(streamed.tokens)  # it starts on the diagonal at the end
    starts = (long_views.window_start("Window: first query", last, "all_window_query", last,
                                      window),
              long_views.window_start("Window: first key", last, "all_window_key", last, window))
    long_views.exact_window(weights, streamed.tokens, layer, head, "all", starts, window,
                            half_width=True)
    long_export_buttons(weights, overview.pooled, streamed.tokens,
                        long_inputs.label(given.source), layer, head, "all_long_export")
else:
    record = current_record()
    if record is not None:
        controls, picture = st.columns([1, 3], gap="medium")  # the controls beside the mosaic
        controls.markdown(
            "Every layer (rows) and every head (columns) of the model, on one colour scale. Click "
            "a tile (or pick a layer and head) to open it large below, with exact values on hover."
        )
        layer = index_slider("Layer", record.num_layers, "all_layer", controls)
        head = index_slider("Head", record.num_heads, "all_head", controls)
        if record.num_tokens > 64:
            controls.caption(f"{record.num_tokens} tokens: each thumbnail shows the largest weight "
                             "of each block of tokens, so thin patterns stay visible; the enlarged "
                             "head below is exact.")
        if "causal" in record.masks:
            controls.caption("This is a causal decoder: each token sees only itself and earlier "
                             "tokens, so every map is a triangle. The bright first column is an "
                             "**attention sink**: heads with nothing useful to look at park their "
                             "weight on the first token (Xiao et al., 2023). The generation page "
                             "measures it head by head.")
        with controls.expander("What to look for"):
            st.markdown(
                "Patterns that repeat: a bright diagonal is a head that attends to the token "
                "itself, a line just below it attends to the previous token, a bright column is a "
                "token that collects attention from everyone (often `[SEP]` or `[CLS]`)."
            )
        shape = (record.num_layers, record.num_heads)
        draw_mosaic(all_heads_figure(thumbnails(record), (layer, head)), controls, picture, shape)
        show(attention_heatmap(record, layer, head), key="all_heatmap")
        export_buttons(record, layer, head, "all_export")
