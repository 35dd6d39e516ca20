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

ui/links.py decides, run by run, when a URL is read and when it is written.
"""

from __future__ import annotations

import ast
import functools
import math
import numbers
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import streamlit as st

from models.limits import (LINK_CONTROL_CHARS, LINK_NUMBER_DIGITS, MAX_SEED, MAX_TEXT_CHARS,
                           MODEL_NAME_CHARS)
from models.loading import kinds
from models.loading.kinds import KindSpec, default_kind
from models.loading.pretrained import model_identity
from ui.charts import PRESENTER
from ui.state import (DEFAULT_TEXT, LOADED_NAMES, MODEL_INPUT, OFFERED, ModelOffer, name_slot,
                      sidebar_name)

SHARED = ("text", "pair", "model", "seed", "merge", "hide", "long", "present")
# Streamlit keeps "embed" and "embed_options"; "deck" is a whole deck shared as one link
# (pages/deck.py reads it, ui/decks.py writes it).
RESERVED = frozenset(SHARED) | {"embed", "embed_options", "deck"}
TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")
NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")

# How a widget call reads a value from a link, by the widget's function name. Anything else
# (buttons, downloads, charts, tables, uploads) is not a setting of a link; a multiselect's
# choices go in as a list of scalars.
# Sliders and number inputs become "int" or "float" from their literal arguments.
WIDGET_KINDS = {
    "checkbox": "bool", "toggle": "bool",
    "text_input": "text", "text_area": "text",
    "slider": "number", "number_input": "number",
    "index_slider": "index", "window_start": "int",
    "selectbox": "choice", "radio": "choice", "select_slider": "choice",
    "segmented_control": "choice", "pills": "choice",
    "multiselect": "list",
}
# ui helpers that draw controls of their own for the page that calls them: the call's key prefix
# (argument index, or keyword) and the keys the helper makes from it, with how each is read
# (ui/views.py `head_map` draws a long head's two window sliders).
HELPER_CONTROLS = {
    "head_map": (3, "prefix", (("window_query", "int"), ("window_key", "int"))),
}
LIST_SEPARATOR = ","  # a multiselect's choices in a link: heads=3-5,7-1


# --- which controls a page has: read once from its source -----------------------------------

@dataclass(frozen=True)
class PageControls:
    """A page's prefix and the keys of its value widgets, with how to read each from text.

    Keys made with an f-string (`f"span_z_head_{h}"`) are kept as patterns."""

    prefix: str
    kinds: dict[str, str] = field(default_factory=dict)
    patterns: tuple[tuple[re.Pattern, str], ...] = ()

    def kind_of(self, key: str) -> str | None:
        if key in self.kinds:
            return self.kinds[key]
        return next((kind for pattern, kind in self.patterns if pattern.fullmatch(key)), None)

    def name_of(self, key: str) -> str:
        """The key as it appears in a link: without the prefix unless that name is taken."""
        name = key[len(self.prefix) + 1:]
        return key if name in RESERVED else name

    def key_of(self, name: str) -> str:
        return name if name.startswith(self.prefix + "_") else f"{self.prefix}_{name}"


NO_CONTROLS = PageControls("")


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _key_argument(call: ast.Call, name: str) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == "key":
            return keyword.value
    if name in ("index_slider", "window_start") and len(call.args) > 2:  # (label, count, key, …)
        return call.args[2]
    return None


def _key_text(node: ast.expr | None) -> tuple[str, bool] | None:
    """A key literal as (text, False), an f-string key as (regex, True), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value, False
    if isinstance(node, ast.JoinedStr):
        parts = [re.escape(part.value) if isinstance(part, ast.Constant) else r"[A-Za-z0-9_]+"
                 for part in node.values]
        return "".join(parts), True
    return None


def _helper_controls(call: ast.Call, name: str) -> list[tuple[str, bool, str]]:
    """The controls a ui helper draws for this call (HELPER_CONTROLS), as literal keys."""
    if name not in HELPER_CONTROLS:
        return []
    index, keyword, controls = HELPER_CONTROLS[name]
    node = next((k.value for k in call.keywords if k.arg == keyword),
                call.args[index] if len(call.args) > index else None)
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return []
    return [(f"{node.value}_{suffix}", False, kind) for suffix, kind in controls]


def _common_prefix(keys: list[str]) -> str:
    """The words before an underscore that most keys start with; of equally common ones the
    longest (`encoder_layer_kind` and `encoder_layer_seed` give `encoder_layer`)."""
    counts = Counter(
        "_".join(words[:end]) for words in (key.split("_") for key in keys)
        for end in range(1, len(words)))
    if not counts:
        return ""
    return max(counts.items(), key=lambda item: (item[1], len(item[0])))[0]


def _numbers_in(call: ast.Call) -> str:
    """'float' when a slider's or number input's literal bounds, value or step include a
    float, 'int' when they are all whole numbers, else 'number' (decided by the value read)."""
    literals = [node.value for node in (*call.args, *(k.value for k in call.keywords))
                if isinstance(node, ast.Constant) and type(node.value) in (int, float)]
    if any(isinstance(value, float) for value in literals):
        return "float"
    return "int" if literals else "number"


def controls_in_source(source: str) -> PageControls:
    """The page's key prefix and its value widgets, read from its source."""
    calls = sorted((node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)),
                   key=lambda node: (node.lineno, node.col_offset))  # in reading order
    found: list[tuple[str, bool, str | None]] = []
    for node in calls:
        name = _call_name(node)
        key = _key_text(_key_argument(node, name))
        if key is not None:
            kind = WIDGET_KINDS.get(name)
            found.append((*key, _numbers_in(node) if kind == "number" else kind))
        found.extend(_helper_controls(node, name))
    prefix = _common_prefix([re.split(r"[\\\[]", text)[0] if is_pattern else text
                             for text, is_pattern, _ in found])
    if not prefix:
        return NO_CONTROLS
    kinds, patterns = {}, []
    for text, is_pattern, kind in found:
        if kind is None or not text.startswith(re.escape(prefix) + "_" if is_pattern
                                               else prefix + "_"):
            continue
        if is_pattern:
            patterns.append((re.compile(text), kind))
        else:
            kinds[text] = kind
    return PageControls(prefix, kinds, tuple(patterns))


@functools.lru_cache(maxsize=64)
def _controls_of_file(path: str, modified_ns: int) -> PageControls:
    return controls_in_source(Path(path).read_text(encoding="utf-8"))


def page_controls(path: Path | str | None) -> PageControls:
    """The controls of the page file at `path` (re-read when the file changes)."""
    if path is None:
        return NO_CONTROLS
    try:
        return _controls_of_file(str(path), Path(path).stat().st_mtime_ns)
    except (OSError, SyntaxError, ValueError):
        return NO_CONTROLS


def page_file(page) -> Path | None:
    """The file behind an `st.Page` (Streamlit keeps it as `_page`; a callable page has none)."""
    source = getattr(page, "_page", None)
    return source if isinstance(source, Path) else None


# --- values: text in a link <-> Python values ----------------------------------------------

class Refused(ValueError):
    """A link's value that cannot be read as what the control needs."""


def _as_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in TRUE:
        return True
    if lowered in FALSE:
        return False
    raise Refused("is not true or false")


def _as_number(text: str) -> int | float:
    """A number read from a link; refused before it is converted when it has more digits than any
    control can use (Python reads no int of more than 4,300 digits, a float overflows above
    about 1.8e308), and when it is not finite."""
    text = text.strip()
    if not NUMBER.fullmatch(text):
        raise Refused("is not a number")
    mantissa = re.split(r"[eE]", text)[0]
    if sum(character.isdigit() for character in mantissa) > LINK_NUMBER_DIGITS:
        raise Refused(f"has more than {LINK_NUMBER_DIGITS} digits")
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    value = float(text)
    if not math.isfinite(value):
        raise Refused("is not a number")
    return value


def _as_whole(text: str) -> int:
    number = _as_number(text)
    if isinstance(number, int):  # exact: a float of a 300-digit int would not equal it
        return number
    if not number.is_integer():
        raise Refused("is not a whole number")
    return int(number)


def _guess(text: str) -> int | float | str:
    """A choice's value when nothing says its type: a number if it reads as one."""
    try:
        return _as_number(text)
    except Refused:
        return text


def _like(current: object, text: str) -> object:
    """`text` read as the type the session already holds for this control."""
    if isinstance(current, bool):
        return _as_bool(text)
    if isinstance(current, numbers.Integral):
        return _as_whole(text)
    if isinstance(current, numbers.Real):
        return float(_as_number(text))
    return text


def read_value(kind: str, text: str, current: object = None) -> object:
    """The value a control of `kind` gets from `text`; raises Refused when it cannot."""
    if len(text) > LINK_CONTROL_CHARS:
        raise Refused("is too long")
    if kind == "bool":
        return _as_bool(text)
    if kind == "text":
        return text
    if kind in ("index", "int"):
        return _as_whole(text)
    if kind == "float":
        return float(_as_number(text))
    if kind == "list":
        return [_guess(part) for part in text.split(LIST_SEPARATOR) if part]
    if isinstance(current, (bool, numbers.Real, str)):
        return _like(current, text)
    if kind == "number":
        return _as_number(text)
    return _guess(text)


def link_text(value: object) -> str | None:
    """How a scalar value is written in a link; None for anything that is not one."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):  # numpy's integers too
        return str(int(value))
    if isinstance(value, numbers.Real):
        return repr(float(value)) if math.isfinite(value) else None
    if isinstance(value, str):
        return value if len(value) <= LINK_CONTROL_CHARS else None
    return None


def control_text(kind: str | None, value: object) -> str | None:
    """How a control's value is written in a link: a multiselect's choices joined by commas
    (left out when empty, or when a choice is not a scalar or holds a comma), else link_text."""
    if kind != "list":
        return link_text(value)
    if not isinstance(value, (list, tuple)) or not value:
        return None
    texts = [link_text(item) for item in value]
    if any(text is None or LIST_SEPARATOR in text for text in texts):
        return None
    joined = LIST_SEPARATOR.join(texts)
    return joined if len(joined) <= LINK_CONTROL_CHARS else None


def quoted(text: str) -> str:
    """A link's text in a note: quoted, and cut short when long."""
    return f"'{text[:40]}…'" if len(text) > 40 else f"'{text}'"


# --- the shared inputs of the sidebar --------------------------------------------------------

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
            seed = _as_number(incoming.get("seed", "0"))
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
                state[key] = _as_bool(incoming.get(name, "false"))
            except Refused:
                notes.append(f"The link's {name}={quoted(incoming[name])} is not true or false; "
                             "leaving it off.")
                state[key] = False
    if "present" in incoming:  # only when named: see the module's docstring
        try:
            state[PRESENTER] = _as_bool(incoming["present"])
        except Refused:
            notes.append(f"The link's present={quoted(incoming['present'])} is not true or "
                         "false; presenter mode is left as it was.")
