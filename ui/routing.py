"""Make sure every page runs inside app.py (its navigation and sidebar).

With a pages/ folder beside the main script, a fresh Streamlit server answers its first requests
with the legacy folder routing, which runs the requested page file on its own, without app.py
(AppTest starts every run that way too). A page that finds itself run like that switches the
legacy routing off and asks for a rerun, which then goes through app.py's st.navigation.

A page knows it runs inside app.py because app.py runs it inside `inside_app()`, not from the
routing flag: the flag is one for the whole server, and sessions that start together on a fresh
server can all be routed the legacy way before the first of them clears it; the later ones then
found it cleared and drew their page with Streamlit's own page list and no sidebar.

Why a private flag: Streamlit 1.67 decides the legacy routing from the folder's name alone
(`PagesManager.uses_pages_directory` is set from `Path(main_script_parent / "pages").exists()`
when the first session starts, and only a run of `st.navigation` clears it); no option or public
call turns it off. The supported way out would be to rename pages/, which this project's layout
keeps. The flag is read and written only here.
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import get_script_run_ctx

_RUN = threading.local()  # a script run stays on its thread while its page runs


@contextmanager
def inside_app() -> Iterator[None]:
    """app.py runs the chosen page inside this."""
    _RUN.inside = True
    try:
        yield
    finally:
        _RUN.inside = False


def through_app() -> None:
    """Called first thing by every page: a page run without app.py (the legacy routing chose it)
    turns that routing off and reruns, through app.py. A page run as the main script itself (a
    test's AppTest of one page file) is left alone."""
    if getattr(_RUN, "inside", False):
        return
    context = get_script_run_ctx()
    if context is not None and Path(context.main_script_path).parent.name == "pages":
        return
    PagesManager.uses_pages_directory = False
    st.rerun()
