"""Streamlit glue shared by the pages: cached resources and the sidebar's state."""
