import streamlit as st

from ui.downloads import export_buttons
from ui.routing import through_app
from ui.state import current_record, index_slider
from viz.heatmap import attention_heatmap, layer_heads_grid

through_app()

st.title("Attention maps")
st.markdown(
    "Each row is a **query** token and each column a **key** token. A cell shows how much the "
    "query attends to the key: every row adds up to 1. Pick a layer and a head; below, every head "
    "of that layer is drawn small on the same colour scale so you can compare them."
)
record = current_record()
if record is not None:
    left, right = st.columns(2)
    layer = index_slider("Layer", record.num_layers, "maps_layer", left)
    head = index_slider("Head", record.num_heads, "maps_head", right)
    st.caption(f"{record.num_tokens} tokens · {record.source}")
    st.plotly_chart(attention_heatmap(record, layer, head), key="maps_heatmap")
    export_buttons(record, layer, head, "maps_export")
    st.plotly_chart(layer_heads_grid(record, layer), key="maps_grid")
