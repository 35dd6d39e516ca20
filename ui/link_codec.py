"""What a link holds, and how each part of it is read from text and written back.

- The shared inputs of the sidebar: `text` (always, so a link describes a whole view), `pair`,
  `model`, `seed`, `merge`, `hide` and `long`, each left out while it has its default value.
- `present=true` when presenter mode is on: a link made in presenter mode opens in it. A link
  without it leaves the viewer's own choice alone (presenter mode is how a viewer looks at any
  view, so a whole view does not switch it off).
- The current page's own controls: every widget whose key starts with the page's prefix and holds
  one int, float, str or bool (`maps_layer` becomes `layer=…`; a name that would clash with a
  shared one, such as `scaling_seed`, keeps its prefix). Which widgets a page has is read once
  from its source. Buttons, tables, charts, uploads, lists and page texts longer than
  `models.limits.LINK_CONTROL_CHARS` never go into a link, and neither do loaded-model messages
  or anything a page keeps in the session besides its widgets.

`model` is the sidebar's model kind (`pretrained`, `decoder`, `scratch-random`,
`scratch-copied`: the values of the kinds models/loading/kinds/ offers the sidebar), followed by
`:name` when the model is not the built-in one of that kind: `model=decoder`,
`model=pretrained:bert-base-uncased`. The name is what the user typed in the sidebar and loaded,
so a link never shows a server path the user did not type. Opening a link never loads a model:
a model is followed only in the session that loaded it (so back and forward work there); anyone
else gets the built-in model, a note, and the link's model in the sidebar's box with a button
asking "Load <name>?".

Every value is read totally: a value that cannot be used (a number of thousands of digits, NaN, a
word where a number goes) is left out with a note, never an exception.

This module reads and writes the shared inputs; which controls a page has is ui/link_controls.py,
how a value is read and written is ui/link_values.py, and ui/links.py decides, run by run, when a
URL is read and when it is written.
"""

from __future__ import annotations

import streamlit as st

from models.limits import MAX_SEED, MAX_TEXT_CHARS, MODEL_NAME_CHARS
from models.loading import kinds
from models.loading.kinds import KindSpec, default_kind
from models.loading.pretrained import model_identity
from ui.charts import PRESENTER
from ui.link_values import Refused, as_bool, as_number, quoted
from ui.state import (DEFAULT_TEXT, LOADED_NAMES, MODEL_INPUT, OFFERED, ModelOffer, name_slot,
                      sidebar_name)


SHARED = ("text", "pair", "model", "seed", "merge", "hide", "long", "present")


# Streamlit keeps "embed" and "embed_options"; "deck" is a whole deck shared as one link
# (pages/deck.py reads it, ui/decks.py writes it).
RESERVED = frozenset(SHARED) | {"embed", "embed_options", "deck"}


def model_param(kind: str) -> str | None:
    """The link's `model` for `kind` with the name the sidebar gives it: `kind:name` unless it is
    the kind's built-in model, `kind` alone unless it is the default kind too."""
    name = sidebar_name(kind)
    if name != kinds.spec(kind).default_name:
        return f"{kind}:{name}"
    return None if kind == default_kind().value else kind


def shared_params() -> dict[str, str]:
    """The sidebar's inputs as link parameters, defaults left out (except the text)."""
    state = st.session_state
    params = {"text": state.get("sb_text", DEFAULT_TEXT) or ""}
    pair = (state.get("sb_pair") or "").strip()
    if pair:
        params["pair"] = pair
    kind = state.get("sb_kind", default_kind().value)
    model = model_param(kind)
    if model is not None:
        params["model"] = model
    seed = int(state.get("sb_seed", 0) or 0)
    if kinds.spec(kind).uses_seed and seed:
        params["seed"] = str(seed)
    if state.get("sb_merge_words"):
        params["merge"] = "true"
    if state.get("sb_hide_special"):
        params["hide"] = "true"
    if state.get("sb_read_all"):  # ui.attention.READ_ALL: read a long text whole
        params["long"] = "true"
    if state.get(PRESENTER):
        params["present"] = "true"
    return params


def _offered(value: str) -> KindSpec | None:
    """The kind a link names, if the sidebar offers it."""
    try:
        kind = kinds.spec(value)
    except ValueError:
        return None
    return kind if kind.offered else None


def _model_from_link(value: str, notes: list[str]) -> tuple[str, str]:
    """The kind and model name a link's `model` names, or the built-in model with a note.

    A link never loads a model: a model this session has not loaded (a Hub id or a folder) is
    put in the sidebar's box with a button asking to load it (ui.state.ModelOffer), and the
    built-in model of the kind is shown meanwhile.
    """
    kind_text, _, name = value.partition(":")
    kind = _offered(kind_text.strip())
    if kind is None:
        fallback = default_kind()
        notes.append(f"The link's model {quoted(kind_text)} is not one this app knows; showing "
                     "the built-in model.")
        return fallback.value, fallback.default_name
    name = name.strip() or kind.default_name
    state = st.session_state
    if name in (kind.default_name, state.get(name_slot(kind.value))) or \
            name in state.get(LOADED_NAMES, ()):
        return kind.value, name
    fallback = (kind.value, kind.default_name)
    if len(name) > MODEL_NAME_CHARS:
        notes.append("The link's model name is too long; showing the built-in model.")
        return fallback
    what = "local folder" if model_identity(name).startswith("folder:") else "model"
    state[MODEL_INPUT] = name
    state[OFFERED] = ModelOffer(kind.value, name)
    notes.append(f"The link names the {what} {quoted(name)}, which this session has not loaded; "
                 "showing the built-in model until you load it with the sidebar's button (Use "
                 "another pretrained model).")
    return fallback


def apply_shared(incoming: dict[str, str], whole: bool, notes: list[str]) -> None:
    """Set the sidebar's session keys from a link (before the sidebar's widgets exist)."""
    state = st.session_state
    if "text" in incoming or whole:
        text = incoming.get("text", DEFAULT_TEXT)
        if len(text) > MAX_TEXT_CHARS:
            notes.append(f"Only the first {MAX_TEXT_CHARS:,} characters of the link's text "
                         "are used.")
            text = text[:MAX_TEXT_CHARS]
        state["sb_text"] = text
    if "pair" in incoming or whole:
        state["sb_pair"] = incoming.get("pair", "")[:MAX_TEXT_CHARS]
    if "model" in incoming or whole:
        state.pop(OFFERED, None)
        kind, name = _model_from_link(incoming.get("model", default_kind().value), notes)
        state["sb_kind"] = kind
        state[name_slot(kind)] = name
    if "seed" in incoming or whole:
        seed = 0
        try:
            seed = as_number(incoming.get("seed", "0"))
            if not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
                raise Refused("is not a seed")
        except Refused:
            notes.append(f"The link's seed {quoted(incoming['seed'])} is not a whole number from "
                         f"0 to {MAX_SEED:,}; using seed 0.")
            seed = 0
        state["sb_seed"] = seed
    for name, key in (("merge", "sb_merge_words"), ("hide", "sb_hide_special"),
                      ("long", "sb_read_all")):
        if name in incoming or whole:
            try:
                state[key] = as_bool(incoming.get(name, "false"))
            except Refused:
                notes.append(f"The link's {name}={quoted(incoming[name])} is not true or false; "
                             "leaving it off.")
                state[key] = False
    if "present" in incoming:  # only when named: see the module's docstring
        try:
            state[PRESENTER] = as_bool(incoming["present"])
        except Refused:
            notes.append(f"The link's present={quoted(incoming['present'])} is not true or "
                         "false; presenter mode is left as it was.")
