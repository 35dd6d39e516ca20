"""Slide decks: an ordered list of views (each a page and its link's query, with a title and a
note for the speaker), read from and written to a small TOML or JSON file, or one link's code.

A deck file:

    title = "Chapter 3: The Transformer, step by step"
    description = "One query row, the masks, the translator."

    [[slides]]
    title = "Scoring “Thinking” against “Machines”"
    view = "row_arithmetic?text=Thinking+Machines"
    note = "q·k, divided by √d_k, then the softmax."
    figure = "row_steps"          # optional: the chart key of the view's main figure

`view` is what "Link to this view" gives after the server's address: the page's url path, then
`?` and the query (ui/link_codec.py says what a query holds). Which pages exist is the caller's
to say (`pages`); nothing here knows the app. Every way a file can be wrong is one `DeckError`
with one sentence naming the slide and the field.
"""

from __future__ import annotations

import base64
import json
import re
import tomllib
import zlib
from collections.abc import Collection
from dataclasses import dataclass, replace
from urllib.parse import parse_qsl, urlencode

from models.limits import (DECK_BYTES, DECK_CODE_CHARS, DECK_NOTE_CHARS, DECK_SLIDES,
                           DECK_TITLE_CHARS, DECK_VIEW_CHARS)

FIGURE_KEY = re.compile(r"[A-Za-z0-9_]{1,100}")
PAGE_NAME = re.compile(r"[a-z0-9_]{0,100}")
SLIDE_FIELDS = ("title", "view", "note", "figure")
DECK_FIELDS = ("title", "description", "slides")
CODE_VERSION = "d1."  # a deck's code in a link starts with this


class DeckError(ValueError):
    """A deck that cannot be read; the message is one sentence for the user."""


@dataclass(frozen=True)
class Slide:
    """One view of a deck."""

    view: str  # "<page url path>?<query>"
    title: str = ""
    note: str = ""
    figure: str = ""  # the chart key of the view's main figure ("" for the page's first)

    @property
    def page(self) -> str:
        return self.view.partition("?")[0]

    @property
    def query(self) -> dict[str, str]:
        return dict(parse_qsl(self.view.partition("?")[2], keep_blank_values=True))


@dataclass(frozen=True)
class Deck:
    title: str
    slides: tuple[Slide, ...] = ()
    description: str = ""


def view_of(page: str, query: dict[str, str]) -> str:
    """A slide's view from a page's url path and its link's query."""
    return f"{page}?{urlencode(query)}" if query else page


# --- checking ---------------------------------------------------------------------------------

def _text(value: object, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise DeckError(f"{what} must be text.")
    if len(value) > limit:
        raise DeckError(f"{what} is longer than {limit:,} characters.")
    return value


def _slide(entry: object, number: int, pages: Collection[str]) -> Slide:
    where = f"Slide {number}"
    if not isinstance(entry, dict):
        raise DeckError(f"{where} must be a table with a view, a title and a note.")
    unknown = sorted(set(entry) - set(SLIDE_FIELDS))
    if unknown:
        raise DeckError(f"{where} has a field this app does not read: {unknown[0]!r} (it reads "
                        f"{', '.join(SLIDE_FIELDS)}).")
    if "view" not in entry:
        raise DeckError(f"{where} has no view (the page and query of a link to the view).")
    view = _text(entry["view"], f"{where}'s view", DECK_VIEW_CHARS).strip().lstrip("/")
    page, _, query = view.partition("?")
    if not PAGE_NAME.fullmatch(page) or page not in pages:
        raise DeckError(f"{where}'s view names the page {page[:40]!r}, which this app does not "
                        "have.")
    try:
        parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise DeckError(f"{where}'s view has a query that is not name=value pairs.") from None
    figure = _text(entry.get("figure", ""), f"{where}'s figure", DECK_TITLE_CHARS)
    if figure and not FIGURE_KEY.fullmatch(figure):
        raise DeckError(f"{where}'s figure must be a chart key (letters, digits and _).")
    return Slide(view=view,
                 title=_text(entry.get("title", ""), f"{where}'s title", DECK_TITLE_CHARS),
                 note=_text(entry.get("note", ""), f"{where}'s note", DECK_NOTE_CHARS),
                 figure=figure)


def deck_from_data(data: object, pages: Collection[str]) -> Deck:
    """A deck from parsed TOML/JSON data, checked against the app's `pages`."""
    if not isinstance(data, dict):
        raise DeckError("A deck must be a table with a title and a list of slides.")
    unknown = sorted(set(data) - set(DECK_FIELDS))
    if unknown:
        raise DeckError(f"The deck has a field this app does not read: {unknown[0]!r} (it reads "
                        f"{', '.join(DECK_FIELDS)}).")
    slides = data.get("slides", [])
    if not isinstance(slides, list) or not slides:
        raise DeckError("The deck has no slides: add at least one [[slides]] with a view.")
    if len(slides) > DECK_SLIDES:
        raise DeckError(f"The deck has {len(slides):,} slides; at most {DECK_SLIDES} are read.")
    return Deck(title=_text(data.get("title", "Untitled deck"), "The deck's title",
                            DECK_TITLE_CHARS) or "Untitled deck",
                description=_text(data.get("description", ""), "The deck's description",
                                  DECK_NOTE_CHARS),
                slides=tuple(_slide(entry, number, pages)
                             for number, entry in enumerate(slides, start=1)))


def read_deck(content: bytes, filename: str, pages: Collection[str]) -> Deck:
    """A deck from a file's bytes: JSON if the name ends in .json (or the text starts with `{`),
    else TOML."""
    name = filename.rsplit("/", 1)[-1][:80] or "The file"
    if len(content) > DECK_BYTES:
        raise DeckError(f"{name} is larger than {DECK_BYTES // 1024} KB; a deck is a small text "
                        "file.")
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        raise DeckError(f"{name} is not UTF-8 text.") from None
    as_json = filename.lower().endswith(".json") or text.lstrip().startswith("{")
    try:
        data = json.loads(text) if as_json else tomllib.loads(text)
    except (json.JSONDecodeError, RecursionError) as error:
        raise DeckError(f"{name} is not valid JSON ({getattr(error, 'msg', 'too deep')}).") \
            from None
    except tomllib.TOMLDecodeError as error:
        raise DeckError(f"{name} is not valid TOML ({str(error).rstrip('.')}).") from None
    return deck_from_data(data, pages)


# --- writing ----------------------------------------------------------------------------------

def _as_data(deck: Deck) -> dict:
    slides = [{name: getattr(slide, name) for name in SLIDE_FIELDS
               if getattr(slide, name) or name == "view"} for slide in deck.slides]
    data: dict = {"title": deck.title}
    if deck.description:
        data["description"] = deck.description
    data["slides"] = slides
    return data


def deck_to_json(deck: Deck) -> str:
    return json.dumps(_as_data(deck), ensure_ascii=False, indent=2) + "\n"


def _toml_string(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, except DEL, which TOML wants escaped."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def deck_to_toml(deck: Deck) -> str:
    data = _as_data(deck)
    lines = [f"{name} = {_toml_string(data[name])}" for name in ("title", "description")
             if name in data]
    for slide in data["slides"]:
        lines += ["", "[[slides]]"]
        lines += [f"{name} = {_toml_string(value)}" for name, value in slide.items()]
    return "\n".join(lines) + "\n"


def deck_to_code(deck: Deck) -> str:
    """The deck as one link's value: compressed JSON in URL-safe base64."""
    packed = zlib.compress(json.dumps(_as_data(deck), separators=(",", ":")).encode("utf-8"), 9)
    code = CODE_VERSION + base64.urlsafe_b64encode(packed).decode("ascii").rstrip("=")
    if len(code) > DECK_CODE_CHARS:
        raise DeckError(f"This deck is too large for one link ({len(code):,} characters, at most "
                        f"{DECK_CODE_CHARS:,}); save it as a file instead.")
    return code


def deck_from_code(code: str, pages: Collection[str]) -> Deck:
    """The deck a link's code holds (deck_to_code's inverse)."""
    if not code.startswith(CODE_VERSION) or len(code) > DECK_CODE_CHARS:
        raise DeckError("The link's deck is not a deck this app wrote.")
    body = code[len(CODE_VERSION):]
    try:
        packed = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        unpacker = zlib.decompressobj()
        text = unpacker.decompress(packed, DECK_BYTES)
        if unpacker.unconsumed_tail or not unpacker.eof:
            raise DeckError("The link's deck is larger than a deck may be.")
        data = json.loads(text.decode("utf-8"))
    except (ValueError, zlib.error, RecursionError) as error:
        if isinstance(error, DeckError):
            raise
        raise DeckError("The link's deck is damaged (cut short or changed by hand).") from None
    return deck_from_data(data, pages)


# --- editing ----------------------------------------------------------------------------------

def added(deck: Deck, slide: Slide) -> Deck:
    if len(deck.slides) >= DECK_SLIDES:
        raise DeckError(f"A deck holds at most {DECK_SLIDES} slides.")
    return replace(deck, slides=(*deck.slides, slide))


def removed(deck: Deck, index: int) -> Deck:
    return replace(deck, slides=tuple(s for i, s in enumerate(deck.slides) if i != index))


def moved(deck: Deck, index: int, offset: int) -> Deck:
    """The deck with slide `index` moved by `offset` places (kept within the deck)."""
    slides = list(deck.slides)
    if not 0 <= index < len(slides):
        return deck
    target = max(0, min(len(slides) - 1, index + offset))
    slides.insert(target, slides.pop(index))
    return replace(deck, slides=tuple(slides))


def edited(deck: Deck, index: int, title: str, note: str) -> Deck:
    """The deck with slide `index`'s title and note replaced (cut to their limits)."""
    slides = list(deck.slides)
    slides[index] = replace(slides[index], title=title[:DECK_TITLE_CHARS],
                            note=note[:DECK_NOTE_CHARS])
    return replace(deck, slides=tuple(slides))
