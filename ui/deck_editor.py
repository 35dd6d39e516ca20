"""Building this session's deck: the draft that "Add this view to the deck" extends, the deck
page's editor (titles, notes, order), a deck read from a link or a file, and the link that shares
it. Presenting and warming a deck are in ui/decks."""

from __future__ import annotations

import re
from dataclasses import replace
from urllib.parse import urlencode, urlsplit

import streamlit as st

from models.limits import DECK_NOTE_CHARS, DECK_TITLE_CHARS
from models.teaching.decks import (Deck, DeckError, Slide, added, deck_from_code, deck_to_code,
                                   edited, moved, read_deck, removed)
from ui.decks import CHOICE, slide_pages
from ui.text import plain

DRAFT = "deck_draft"  # session key: the deck being built ("Add this view to the deck")
LINKED = "deck_linked_code"  # session key: the deck code of the link last opened
UPLOADED = "deck_uploaded_id"  # session key: the uploaded file last read
SLIDE_WIDGETS = "deck_slide_"  # the editor's widget keys start with this


def draft() -> Deck:
    return st.session_state.get(DRAFT) or Deck("My deck")


def set_draft(deck: Deck) -> None:
    st.session_state[DRAFT] = deck


def add_view(view: str, title: str) -> None:
    """Button callback: the view on screen as the draft's last slide."""
    try:
        set_draft(added(draft(), Slide(view=view, title=title)))
    except DeckError as error:
        st.session_state["deck_add_message"] = str(error)
        return
    st.session_state["deck_add_message"] = (f"Added as slide {len(draft().slides)} of your "
                                            "deck (Slide decks page).")


def add_message() -> str | None:
    return st.session_state.pop("deck_add_message", None)


def load_linked_deck() -> None:
    """A deck shared as one link (`deck?deck=<code>`) becomes this session's deck."""
    code = st.query_params.get("deck")
    if not code or code == st.session_state.get(LINKED):
        return
    st.session_state[LINKED] = code
    try:
        set_draft(deck_from_code(code, slide_pages()))
    except DeckError as error:
        st.error(str(error))
        return
    st.session_state[CHOICE] = "mine"
    st.success("The deck from the link is now your deck: present it, warm it up or change it.")


def load_upload(upload) -> None:
    """An uploaded deck file becomes this session's deck (read once per file)."""
    if upload is None or upload.file_id == st.session_state.get(UPLOADED):
        return
    st.session_state[UPLOADED] = upload.file_id
    try:
        deck = read_deck(upload.getvalue(), upload.name, slide_pages())
    except DeckError as error:
        st.error(str(error))
        return
    set_draft(deck)
    _forget_editor()
    st.rerun()


def deck_url(deck: Deck) -> str:
    """A link that opens `deck` on the deck page of this server."""
    base = st.context.url or ""
    parts = urlsplit(base)
    root = f"{parts.scheme}://{parts.netloc}" if parts.netloc else ""
    prefix = (st.get_option("server.baseUrlPath") or "").strip("/")
    path = "/".join(part for part in (prefix, "deck") if part)
    return f"{root}/{path}?{urlencode({'deck': deck_to_code(deck)})}"


def file_stem(deck: Deck) -> str:
    stem = re.sub(r"[^a-z0-9]+", "-", deck.title.lower()).strip("-")[:60]
    return stem or "deck"


def show_slides(deck: Deck) -> None:
    st.dataframe(
        [{"slide": number, "title": slide.title, "page": slide.page or "attention_maps",
          "note": slide.note} for number, slide in enumerate(deck.slides, start=1)],
        hide_index=True, key="deck_slides")


def _forget_editor() -> None:
    """Drop the editor's widget values so that they show the draft again (after a move)."""
    for key in [key for key in st.session_state if str(key).startswith(SLIDE_WIDGETS)]:
        del st.session_state[key]


def _change(operation, *args) -> None:
    set_draft(operation(draft(), *args))
    _forget_editor()


def _edit(index: int) -> None:
    state = st.session_state
    set_draft(edited(draft(), index, state.get(f"{SLIDE_WIDGETS}title_{index}", ""),
                     state.get(f"{SLIDE_WIDGETS}note_{index}", "")))


def _rename() -> None:
    set_draft(replace(draft(), title=st.session_state.get("deck_own_title", "")[:DECK_TITLE_CHARS]
                      or "My deck"))


def edit_draft() -> None:
    """This session's deck: its title, and each slide's title and note, moved or removed."""
    deck = draft()
    st.session_state.setdefault("deck_own_title", deck.title)
    st.text_input("Title of your deck", key="deck_own_title", on_change=_rename,
                  max_chars=DECK_TITLE_CHARS)
    if not deck.slides:
        st.info("Your deck is empty. On any page, set up a view and press *Add this view to the "
                "deck* in the sidebar; or copy one of the chapters' decks; or open a deck file.")
        return
    last = len(deck.slides) - 1
    for index, slide in enumerate(deck.slides):
        with st.container(border=True, key=f"{SLIDE_WIDGETS}box_{index}"):
            title, up, down, remove = st.columns([8, 1, 1, 1], vertical_alignment="bottom")
            st.session_state.setdefault(f"{SLIDE_WIDGETS}title_{index}", slide.title)
            st.session_state.setdefault(f"{SLIDE_WIDGETS}note_{index}", slide.note)
            title.text_input(f"Slide {index + 1}", max_chars=DECK_TITLE_CHARS,
                             key=f"{SLIDE_WIDGETS}title_{index}", on_change=_edit, args=(index,))
            up.button("", key=f"{SLIDE_WIDGETS}up_{index}", icon=":material/arrow_upward:",
                      help="Move up", disabled=index == 0, on_click=_change,
                      args=(moved, index, -1))
            down.button("", key=f"{SLIDE_WIDGETS}down_{index}", icon=":material/arrow_downward:",
                        help="Move down", disabled=index == last, on_click=_change,
                        args=(moved, index, 1))
            remove.button("", key=f"{SLIDE_WIDGETS}remove_{index}", icon=":material/delete:",
                          help="Remove this slide", on_click=_change, args=(removed, index))
            st.text_area("Note for the speaker", max_chars=DECK_NOTE_CHARS,
                         key=f"{SLIDE_WIDGETS}note_{index}", on_change=_edit, args=(index,),
                         height=68)
            st.caption(plain(f"View: {slide.view}"))


