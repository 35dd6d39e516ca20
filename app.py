"""Attention Explorer: navigation and the sidebar shared by every page."""

import logging

import streamlit as st

from ui.state import sidebar

st.set_page_config(page_title="Attention Explorer", page_icon="🔍", layout="wide")

page = st.navigation([
    st.Page("pages/attention_maps.py", title="Attention maps", icon="🟦", default=True),
])
sidebar()
try:
    page.run()
except Exception:  # the last guard: log the trace for the operator, show a sentence to the user
    logging.getLogger("attention_explorer").exception("page %s failed", page.title)
    st.error("Something went wrong while drawing this page. Try another input or model; "
             "the details are in the server log.")
