"""Make sure every page runs inside app.py (its navigation and sidebar).

With a pages/ folder beside the main script, a fresh Streamlit server answers its very first
request with the legacy folder routing, which runs the requested page file on its own, without
app.py (AppTest starts every run that way too). A page that finds itself run like that switches
the legacy routing off and asks for a rerun, which then goes through app.py's st.navigation.

Why a private flag: Streamlit 1.67 decides the legacy routing from the folder's name alone
(`PagesManager.uses_pages_directory` is set from `Path(main_script_parent / "pages").exists()`
when the first session starts, and only a run of `st.navigation` clears it); no option or public
call turns it off. The supported way out would be to rename pages/, which this project's layout
keeps. The flag is read and written only here.
"""

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager


def through_app() -> None:
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()
