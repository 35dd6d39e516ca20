"""Attention Explorer: navigation and the sidebar shared by every page."""

import logging

import streamlit as st

from ui.state import sidebar

st.set_page_config(page_title="Attention Explorer", page_icon="🔍", layout="wide")

# Every url_path differs from its file's name on purpose: with a pages/ folder present, a fresh
# server's very first run uses Streamlit's legacy folder routing, which would run a page file
# matching the URL without this script (no sidebar). A URL matching no file falls through to here.
page = st.navigation([
    st.Page("pages/attention_maps.py", title="Attention maps", icon="🟦", url_path="maps", default=True),
])
sidebar()
try:
    page.run()
except Exception:  # the last guard: log the trace for the operator, show a sentence to the user
    logging.getLogger("attention_explorer").exception("page %s failed", page.title)
    st.error("Something went wrong while drawing this page. Try another input or model; "
             "the details are in the server log.")
