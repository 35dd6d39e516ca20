"""The start page's way into teaching: one link per lesson and one per chapter deck.

Only the lessons' titles (ui/lesson_index.py) and the decks' files are read here: the lessons'
figures, and the training code behind them, load when a lesson opens.
"""

from __future__ import annotations

import streamlit as st

from ui import decks
from ui.lesson_index import TITLES
from ui.link_codec import shared_params

LINKS_KEY = "start_links"
# A link's label wraps instead of being cut with "…" (presenter mode's larger text included).
WRAP_CSS = f"""<style>
.st-key-{LINKS_KEY} [data-testid="stPageLink-NavLink"],
.st-key-{LINKS_KEY} [data-testid="stPageLink-NavLink"] * {{
  white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
  height: auto !important;
}}
</style>"""
LESSONS_PAGE = "pages/lessons.py"
DECK_PAGE = "pages/deck.py"


def lesson_query(key: str, shared: dict[str, str]) -> dict[str, str]:
    """The first step of lesson `key`, with the sidebar's sentence, model and presenter mode."""
    return {**shared, "lesson": key, "step": "1"}


def deck_query(name: str, shared: dict[str, str]) -> dict[str, str]:
    """The deck page with the shipped deck `name` chosen (its selectbox's link name)."""
    return {**shared, "choice": name}


def lessons_and_decks() -> None:
    """A short section: every lesson and every chapter deck, each one link. Not while a deck
    is being presented or warmed up (the slide is the page's first screen then)."""
    if st.session_state.get(decks.SHOWING) or st.session_state.get(decks.WARMING):
        return
    shipped = decks.shipped()
    shared = shared_params()
    with st.expander(f"Start here: {len(TITLES)} guided lessons and {len(shipped)} slide decks, "
                     "one per chapter", icon=":material/school:"), st.container(key=LINKS_KEY):
        st.html(WRAP_CSS)
        lessons_column, decks_column = st.columns(2, gap="medium")
        lessons_column.markdown("**Lessons**: short steps on your own sentence, each with a "
                                "question.")
        for key, title in TITLES.items():
            lessons_column.page_link(LESSONS_PAGE, label=title, icon=":material/school:",
                                     query_params=lesson_query(key, shared))
        decks_column.markdown("**Chapter decks**: a lecture's views in order, ready to present "
                              "(warm one up before class).")
        for name, deck in shipped.items():
            decks_column.page_link(DECK_PAGE, label=f"{deck.title} ({len(deck.slides)} slides)",
                                   icon=":material/slideshow:",
                                   query_params=deck_query(name, shared))
