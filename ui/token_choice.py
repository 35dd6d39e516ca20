"""The model's top predictions as pills that fill a token box when clicked (the intervention
pages' answer and wrong token)."""

from __future__ import annotations

import streamlit as st

from models.experiments.predictions import Candidate


def _take(choice_key: str, text_key: str) -> None:
    """Pills callback: the clicked token becomes the typed one, and the pills clear (so a pill
    is never part of the page's state or link)."""
    chosen = st.session_state.get(choice_key)
    if chosen is not None:
        st.session_state[text_key] = chosen
    st.session_state[choice_key] = None


def token_pills(label: str, candidates: tuple[Candidate, ...], choice_key: str, text_key: str,
                container=st) -> None:
    """Pills of the candidates' texts (shown quoted, so a leading space shows); a click puts the
    text into the session key `text_key` (a text box drawn after them)."""
    container.pills(label, [candidate.text for candidate in candidates], key=choice_key,
                    format_func=repr, on_change=_take, args=(choice_key, text_key))
