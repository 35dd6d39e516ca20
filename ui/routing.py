"""Make sure every page runs inside app.py (its navigation and sidebar).

With a pages/ folder present, a fresh Streamlit server answers its very first request with the
legacy folder routing, which runs the page file on its own, without app.py. (AppTest starts every
run that way.) A page that finds itself run like that switches the legacy routing off and asks
for a rerun, which then goes through app.py's st.navigation.
"""

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager


def through_app() -> None:
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()
