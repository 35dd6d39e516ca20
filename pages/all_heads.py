import streamlit as st

from ui.charts import show
from ui.downloads import export_buttons
from ui.routing import through_app
from ui.state import current_record, index_slider
from viz.heatmap import attention_heatmap
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

st.title("All heads at once")
record = current_record()
if record is not None:
    controls, picture = st.columns([1, 3], gap="medium")  # the controls beside the mosaic
    controls.markdown(
        "Every layer (rows) and every head (columns) of the model, on one colour scale. Click a "
        "tile (or pick a layer and head) to open it large below, with exact values on hover."
    )
    layer = index_slider("Layer", record.num_layers, "all_layer", controls)
    head = index_slider("Head", record.num_heads, "all_head", controls)
    if record.num_tokens > 64:
        controls.caption(f"{record.num_tokens} tokens: each thumbnail shows the largest weight of "
                         "each block of tokens, so thin patterns stay visible; the enlarged head "
                         "below is exact.")
    if "causal" in record.masks:
        controls.caption("This is a causal decoder: each token sees only itself and earlier "
                         "tokens, so every map is a triangle. The bright first column is an "
                         "**attention sink**: heads with nothing useful to look at park their "
                         "weight on the first token (Xiao et al., 2023). The generation page "
                         "measures it head by head.")
    with controls.expander("What to look for"):
        st.markdown(
            "Patterns that repeat: a bright diagonal is a head that attends to the token itself, "
            "a line just below it attends to the previous token, a bright column is a token that "
            "collects attention from everyone (often `[SEP]` or `[CLS]`)."
        )
    shape = (record.num_layers, record.num_heads)
    mosaic = all_heads_figure(record, (layer, head))
    # a column narrower than the figure: keep the tiles (and their H labels) at the top of it
    mosaic.update_yaxes(constrain="domain", constraintoward="top")
    show(mosaic, key="all_mosaic", container=picture,
         on_select=lambda: open_clicked_tile(*shape), selection_mode="points")
    show(attention_heatmap(record, layer, head), key="all_heatmap")
    export_buttons(record, layer, head, "all_export")
