"""Streamlit's own floor for bench/bench_cached_view.py: a page drawing one small Plotly figure
and computing nothing."""

import plotly.graph_objects as go
import streamlit as st

st.title("Floor")
st.plotly_chart(go.Figure(go.Heatmap(z=[[0.1, 0.9], [0.6, 0.4]], x=["a", "b"], y=["a", "b"]),
                          layout={"title": {"text": "Floor"}}))
