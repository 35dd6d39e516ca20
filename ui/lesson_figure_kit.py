"""What every lesson figure shares: the on/off "try this" switches' session keys and how a figure
is drawn."""

from __future__ import annotations

import streamlit as st

from ui import charts


FLAG = "lessons_flag_"  # session keys of the lessons' on/off "try this" switches


def show_figure(figure, key: str) -> None:
    charts.show(figure, key)


def flag(name: str) -> bool:
    return bool(st.session_state.get(FLAG + name))


def first_word(tokens: tuple[str, ...]) -> int:
    """The query a step looks at: the first token after a leading special token, if any."""
    return min(1, len(tokens) - 1)
