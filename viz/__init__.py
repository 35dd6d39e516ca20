"""Pure figure builders: an AttentionRecord in, a Plotly figure, HTML string or DataFrame out."""
