import streamlit as st

from ui import attention as inputs
from ui import views
from ui.charts import show
from ui.downloads import figure_downloads
from ui.routing import through_app
from ui.state import index_slider
from viz.export import safe_stem
from viz.export_figures import title_for
from viz.overview import all_heads_figure, clicked_tile, layers_across

through_app()


def open_clicked_tile(num_layers: int, num_heads: int) -> None:
    """Runs before the rerun a click on the mosaic starts: the clicked tile becomes the layer and
    head of the sliders (which are not drawn yet, so they may still be set)."""
    event = st.session_state.get("all_mosaic") or {}
    points = (event.get("selection") or {}).get("points") or []
    tile = clicked_tile(points, num_layers, num_heads)
    if tile is not None:
        st.session_state["all_layer"], st.session_state["all_head"] = tile


st.title("All heads at once")
attention = inputs.current()
if attention is not None:
    across = layers_across(attention.num_layers, attention.num_heads)
    if across:  # a wide mosaic: the controls in a row above it, the notes under it, full width
        intro, layer_box, head_box = st.columns([2, 1, 1], gap="medium")
        picture, controls = st.container(), st.container()
    else:  # a square or tall one: the controls beside it
        controls, picture = st.columns([1, 3], gap="medium")
        intro = layer_box = head_box = controls
    intro.markdown(
        ("Every layer (columns) and every head (rows) of the model" if across else
         "Every layer (rows) and every head (columns) of the model")
        + ", on one colour scale. Click a tile (or pick a layer and head) to open it large "
          "below, with exact values on hover."
    )
    layer = index_slider("Layer", attention.num_layers, "all_layer", layer_box)
    head = index_slider("Head", attention.num_heads, "all_head", head_box)
    controls.caption(inputs.caption(attention))
    summary = attention.summary()
    if summary.pooled.shape[-1] < attention.num_tokens:
        controls.caption("Each thumbnail shows the largest weight of each block of tokens, so "
                         "thin patterns stay visible; the head opened below is exact.")
    per_tile = head_box.toggle(
        "Per-head colours", key="all_tile_scale",
        help="Over many keys most weights are small, so on one 0–100 % scale many heads' "
             "patterns are faint. Turned on, each head's colours run from 0 to its own "
             "99th-percentile block: patterns show, but colours no longer compare across heads.")
    if attention.causal:
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
    def build_mosaic():
        mosaic = all_heads_figure(summary.thumbnails, (layer, head), per_tile)
        # a column narrower than the figure: keep the tiles (and their H labels) at the top of it
        return mosaic.update_yaxes(constrain="domain", constraintoward="top")

    mosaic = views.kept_figure(attention, ("mosaic", layer, head, per_tile), build_mosaic)
    show(mosaic, key="all_mosaic", container=picture, selection_mode="points",
         on_select=lambda: open_clicked_tile(attention.num_layers, attention.num_heads))
    figure_downloads(mosaic, title_for("All heads", attention.tokens, layer, head),
                     f"{safe_stem(attention.label)}_all_heads", "all_figure")
    views.head_map(attention, layer, head, "all")
    views.head_exports(attention, layer, head, "all_export")
