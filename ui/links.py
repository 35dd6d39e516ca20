"""A link for every view: each page's state lives in its URL, so a view can be shared or revisited.

What goes into a link, and nothing else:

- the shared inputs of the sidebar: `text` (always, so a link describes a whole view), `pair`,
  `model`, `seed`, `merge` and `hide`, each left out while it has its default value;
- the current page's own controls: every widget whose key starts with the page's prefix and holds
  one int, float, str or bool (`maps_layer` becomes `layer=…`; a name that would clash with a
  shared one, such as `scaling_seed`, keeps its prefix). Buttons, tables, charts, uploads, lists
  and page texts longer than `MAX_CONTROL_CHARS` never go into a link, and neither do loaded-model
  messages or anything a page keeps in the session besides its widgets.

`model` is the sidebar's model kind (`pretrained`, `decoder`, `scratch-random`,
`scratch-copied`, see `models.source.Kind`), followed by `:name` when the model is not the
built-in one of that kind: `model=decoder`, `model=pretrained:bert-base-uncased`. The name is what
the user typed in the sidebar and loaded, so a link never shows a server path the user did not
type. Opening a link loads a Hub id the way the sidebar's Load button does; a local folder is
followed only in the session that loaded it (so back and forward work there), never opened for
anyone else: they get the built-in model and a note asking them to load the folder themselves.

Reading a link: a URL that carries `text` describes a whole view, so anything it leaves out falls
back to its default; a URL without `text` (such as `?layer=5`) only changes what it names. A URL
equal to the one this session last wrote is not read again (the session's widgets are newer),
and neither is an empty one (Streamlit opens a page picked in the menu without a query). Values
the model or page cannot show fall back to valid ones with a note above the page: an index past
the model's layers or heads (`ui.state.index_slider`), a choice that is not among the options,
a number a slider refuses (the page is drawn again without it).

Back and forward: Streamlit 1.67's frontend pushes a browser history entry whenever the server
changes the query (`handlePageInfoChanged` calls `history.pushState`, or `replaceState` during a
run started by back/forward), and on `popstate` it reruns the app with that entry's query
(`onHistoryChange`, `is_history_navigation`). Each change of the view is therefore one history
entry, and going back reruns with the earlier query, which this module reads as any other link.
Picking a page in the menu adds two entries: the bare page URL (pushed by Streamlit) and the same
page with its query (pushed when this module writes it); going back over the bare one changes
nothing on screen. The default page's link is `/?…`: Streamlit rewrites `/attention_maps?…` to
`/?…` with a history entry of its own.

The query is written after the page has run, so it holds what the page shows (a slider whose range
changed with the input starts again from its default) and only the controls it drew. A page
whose last run ended early (`st.stop()`, an error) may do so again, so its query is then also
written before it runs.
"""

from __future__ import annotations

import ast
import functools
import logging
import math
import numbers
import re
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import streamlit as st

from models.decoder import DEFAULT_DECODER
from models.errors import ModelLoadError
from models.limits import MAX_TEXT_CHARS, MODEL_NAME_CHARS
from models.pretrained import DEFAULT_MODEL, model_identity
from models.source import Kind
from ui import cache
from ui.state import CORRECTED, DECODER_NAME, DEFAULT_TEXT, LOADED_NAMES, MODEL_NAME
from ui.text import plain

SHARED = ("text", "pair", "model", "seed", "merge", "hide")
RESERVED = frozenset(SHARED) | {"embed", "embed_options"}  # Streamlit keeps the last two
MAX_CONTROL_CHARS = 500  # a page's text box longer than this is data, not a setting
MAX_SEED = 2**31 - 1
WRITTEN = "_link_written"  # session key: the query this session last wrote
PAGE = "_link_page"  # session key: the url path of the page this session ran last
ENDED = "_link_page_ended"  # session key: whether the page's last run reached its end
CARRIED_NOTES = "_link_notes"  # session key: notes for the next run, after a retry
CARRIED_VALUES = "_link_values"  # session key: the link's values a retry keeps
TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")
NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")

# How a widget call reads a value from a link, by the widget's function name. Anything else
# (buttons, downloads, charts, tables, multiselects, uploads) is not a setting of a link.
# Sliders and number inputs become "int" or "float" from their literal arguments.
WIDGET_KINDS = {
    "checkbox": "bool", "toggle": "bool",
    "text_input": "text", "text_area": "text",
    "slider": "number", "number_input": "number",
    "index_slider": "index",
    "selectbox": "choice", "radio": "choice", "select_slider": "choice",
    "segmented_control": "choice", "pills": "choice",
}

logger = logging.getLogger("attention_explorer")


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
    if name == "index_slider" and len(call.args) > 2:  # index_slider(label, count, key, ...)
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


def _page_file(page) -> Path | None:
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
    text = text.strip()
    if not NUMBER.fullmatch(text):
        raise Refused("is not a number")
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    value = float(text)
    if not math.isfinite(value):
        raise Refused("is not a number")
    return value


def _as_whole(text: str) -> int:
    number = _as_number(text)
    if float(number) != int(number):
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
    if len(text) > MAX_CONTROL_CHARS:
        raise Refused("is too long")
    if kind == "bool":
        return _as_bool(text)
    if kind == "text":
        return text
    if kind in ("index", "int"):
        return _as_whole(text)
    if kind == "float":
        return float(_as_number(text))
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
        return value if len(value) <= MAX_CONTROL_CHARS else None
    return None


def _quoted(text: str) -> str:
    """A link's text in a note: quoted, and cut short when long."""
    return f"'{text[:40]}…'" if len(text) > 40 else f"'{text}'"


# --- the shared inputs of the sidebar --------------------------------------------------------

def _default_name(kind: Kind) -> str:
    return DEFAULT_DECODER if kind is Kind.DECODER else DEFAULT_MODEL


def _name_slot(kind: Kind) -> str:
    return DECODER_NAME if kind is Kind.DECODER else MODEL_NAME


def shared_params() -> dict[str, str]:
    """The sidebar's inputs as link parameters, defaults left out (except the text)."""
    state = st.session_state
    params = {"text": state.get("sb_text", DEFAULT_TEXT) or ""}
    pair = (state.get("sb_pair") or "").strip()
    if pair:
        params["pair"] = pair
    kind = Kind(state.get("sb_kind", Kind.ENCODER.value))
    name = state.get(_name_slot(kind), _default_name(kind))
    if name != _default_name(kind):
        params["model"] = f"{kind.value}:{name}"
    elif kind is not Kind.ENCODER:
        params["model"] = kind.value
    seed = int(state.get("sb_seed", 0) or 0)
    if kind is Kind.SCRATCH_RANDOM and seed:
        params["seed"] = str(seed)
    if state.get("sb_merge_words"):
        params["merge"] = "true"
    if state.get("sb_hide_special"):
        params["hide"] = "true"
    return params


def _model_from_link(value: str, notes: list[str]) -> tuple[Kind, str]:
    """The kind and model name a link's `model` names, or the built-in model with a note."""
    kind_text, _, name = value.partition(":")
    try:
        kind = Kind(kind_text.strip())
    except ValueError:
        notes.append(f"The link's model {_quoted(kind_text)} is not one this app knows; showing "
                     "the built-in pretrained encoder.")
        return Kind.ENCODER, DEFAULT_MODEL
    name = name.strip() or _default_name(kind)
    state = st.session_state
    if name in (_default_name(kind), state.get(_name_slot(kind))) or \
            name in state.get(LOADED_NAMES, ()):
        return kind, name
    fallback = (kind, _default_name(kind))
    if len(name) > MODEL_NAME_CHARS:
        notes.append("The link's model name is too long; showing the built-in model.")
        return fallback
    if model_identity(name).startswith("folder:"):
        notes.append(f"The link names the local folder {_quoted(name)}, which this session has not "
                     "loaded; showing the built-in model. Load the folder in the sidebar "
                     "(Use another pretrained model) to see it.")
        return fallback
    try:
        (cache.decoder if kind is Kind.DECODER else cache.pretrained)(name)
    except ModelLoadError as error:
        notes.append(f"{error} Showing the built-in model instead.")
        return fallback
    return kind, name


def _apply_shared(incoming: dict[str, str], whole: bool, notes: list[str]) -> None:
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
        kind, name = _model_from_link(incoming.get("model", Kind.ENCODER.value), notes)
        state["sb_kind"] = kind.value
        state[_name_slot(kind)] = name
    if "seed" in incoming or whole:
        seed = 0
        try:
            seed = _as_number(incoming.get("seed", "0"))
            if not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
                raise Refused("is not a seed")
        except Refused:
            notes.append(f"The link's seed {_quoted(incoming['seed'])} is not a whole number from "
                         f"0 to {MAX_SEED:,}; using seed 0.")
            seed = 0
        state["sb_seed"] = seed
    for name, key in (("merge", "sb_merge_words"), ("hide", "sb_hide_special")):
        if name in incoming or whole:
            try:
                state[key] = _as_bool(incoming.get(name, "false"))
            except Refused:
                notes.append(f"The link's {name}={_quoted(incoming[name])} is not true or false; "
                             "leaving it off.")
                state[key] = False


# --- one run of the app: read the link, write it back, check what the page showed ------------

def _drawn_keys() -> set[str] | None:
    """Keys of the widgets drawn so far in this run, from Streamlit's own record of the run
    (internal to Streamlit 1.67; None, meaning every key, if that record is not there)."""
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx
    from streamlit.runtime.state import get_session_state

    try:
        drawn = get_script_run_ctx().shared.widget_ids_this_run
        mapping = get_session_state()._state._key_id_mapper.id_key_mapping
    except AttributeError:
        return None
    return {key for widget_id, key in mapping.items() if widget_id in drawn}


def _same(first: object, second: object) -> bool:
    """Equal values of the same kind (2 and 2.0 are the same number; True is not 1)."""
    if isinstance(first, (bool, str)) or isinstance(second, (bool, str)):
        return type(first) is type(second) and first == second
    return first == second


@dataclass
class LinkedView:
    """The link of one run: what it set, the notes to show, and the page it belongs to."""

    url_path: str
    controls: PageControls
    incoming: dict[str, str]
    applied: dict[str, object] = field(default_factory=dict)  # page keys set from the link
    notes: list[str] = field(default_factory=list)
    slot: object = None  # the place above the page where notes appear
    link_slot: object = None  # the place in the sidebar where the link is offered
    written: dict[str, str] | None = None  # the query written in this run
    switched: bool = True  # the first run of this page (a page picked in the menu, or a new tab)

    # -- before the sidebar -------------------------------------------------------------
    @classmethod
    def restore(cls, page) -> LinkedView:
        """Read the URL into the session state. Call before any widget is drawn."""
        state = st.session_state
        view = cls(page.url_path, page_controls(_page_file(page)), st.query_params.to_dict(),
                   notes=list(state.pop(CARRIED_NOTES, [])), slot=st.empty(),
                   switched=state.get(PAGE) != page.url_path)
        state[PAGE] = page.url_path
        state[CORRECTED] = set()
        for key, value in state.pop(CARRIED_VALUES, {}).items():
            state[key] = view.applied[key] = value
        if view.incoming and view.incoming != state.get(WRITTEN):
            whole = "text" in view.incoming
            _apply_shared(view.incoming, whole, view.notes)
            view._apply_controls(whole)
        return view

    def _apply_controls(self, whole: bool) -> None:
        state = st.session_state
        controls = self.controls
        given = {name: text for name, text in self.incoming.items() if name not in RESERVED}
        if whole and controls.prefix:
            for key in [key for key in state if controls.kind_of(str(key))]:
                if controls.name_of(key) not in given:
                    del state[key]  # left out of a whole view: back to the default
        for name, text in given.items():
            key = controls.key_of(name)
            kind = controls.kind_of(key) if controls.prefix else None
            if kind is None:
                self.notes.append(f"{_quoted(name)} is not a setting of this page; it was left "
                                  "out.")
                continue
            try:
                value = read_value(kind, text, state.get(key))
            except Refused as reason:
                self.notes.append(f"The link's {name}={_quoted(text)} {reason}; it was left "
                                  "out.")
                continue
            state[key] = value
            self.applied[key] = value

    # -- after the sidebar, before the page ---------------------------------------------
    def params(self, drawn: set[str] | None = None) -> dict[str, str]:
        """The view in the session now: shared inputs, then this page's controls (only those
        in `drawn` when given: a control the page no longer shows is not part of the view)."""
        params = shared_params()
        controls = self.controls
        if not controls.prefix:
            return params
        present = [str(key) for key in st.session_state]
        for key in [*controls.kinds, *sorted(present)]:
            if key in st.session_state and controls.kind_of(key) \
                    and controls.name_of(key) not in params and (drawn is None or key in drawn):
                text = link_text(st.session_state[key])
                if text is not None:
                    params[controls.name_of(key)] = text
        return params

    def share(self) -> None:
        """Offer the link in the sidebar; write the URL now only if the page's last run ended
        early (`st.stop()` or an error), since this one may too.

        The URL is otherwise written after the page: only then is it what the page shows (a
        slider whose range changed starts again from its default), and only then has Streamlit's
        frontend moved to a newly picked page's path (a query written before that would make a
        history entry of the old path with the new page's query)."""
        state = st.session_state
        if not self.switched and not state.get(ENDED, True):
            self._write()
        state[ENDED] = False
        self._show_notes()
        self.link_slot = st.sidebar.empty()
        self._offer_link()

    def _offer_link(self) -> None:
        with self.link_slot.container():
            with st.popover("Link to this view", icon=":material/link:", width="stretch"):
                st.caption("Anyone who opens this link sees this page with the same sentence, "
                           "model and settings. Copy it with the button in the box's corner.")
                st.code(self.url(), language=None, wrap_lines=True)

    def _write(self, drawn: set[str] | None = None) -> None:
        params = self.params(drawn)
        if params != st.query_params.to_dict():
            st.query_params.from_dict(params)
        st.session_state[WRITTEN] = self.written = params

    def url(self) -> str:
        """The full link: this server's address as the browser sees it, the page and query."""
        query = urlencode(self.written if self.written is not None else self.params())
        base = st.context.url
        if base:
            parts = urlsplit(base)
            root = f"{parts.scheme}://{parts.netloc}"
        else:
            host = st.context.headers.get("host") if st.context.headers else None
            root = f"http://{host}" if host else ""
        prefix = (st.get_option("server.baseUrlPath") or "").strip("/")
        path = "/".join(part for part in (prefix, self.url_path) if part)
        return f"{root}/{path}" + (f"?{query}" if query else "")

    def _show_notes(self) -> None:
        if self.notes:
            self.slot.info("  \n".join(plain(note) for note in dict.fromkeys(self.notes)),
                           icon=":material/link:")

    # -- after the page -----------------------------------------------------------------
    def check(self) -> None:
        """After the page: a note for each value from the link that it showed differently, and
        the URL and the offered link set to what it shows."""
        state = st.session_state
        corrected = state.get(CORRECTED, set())
        for key, value in self.applied.items():
            shown = state.get(key)
            if key not in state or _same(shown, value):
                continue
            if key not in corrected:
                name = self.controls.name_of(key)
                self.notes.append(f"The link's {name}={link_text(value)} is not available "
                                  f"here; showing {link_text(shown) or 'another choice'}.")
        self._write(_drawn_keys())
        self._offer_link()
        self._show_notes()
        state[ENDED] = True

    def retry_without_link(self, error: Exception) -> bool:
        """After the page failed on a value from the link (a slider refuses a number outside
        its range, a button refuses any value): draw the page again without it. False when
        the failure had nothing to do with the link."""
        if not self.applied:
            return False
        refused = _refusing_key(error, self.applied) or list(self.applied)
        logger.info("page %s refused %s from a link (%r); drawn again without", self.url_path,
                    refused, error)
        for key in refused:
            st.session_state.pop(key, None)
        shown = ", ".join(f"{self.controls.name_of(key)}={link_text(self.applied[key])}"
                          for key in refused)
        state = st.session_state
        state[CARRIED_NOTES] = self.notes + [
            f"The link's {shown} is outside what this page allows; it was left out."]
        state[CARRIED_VALUES] = {key: value for key, value in self.applied.items()
                                 if key not in refused}
        state[WRITTEN] = self.incoming  # the next run does not read the link again
        st.rerun()
        return True  # not reached: st.rerun() ends this run


def _refusing_key(error: BaseException, applied: dict[str, object]) -> list[str]:
    """The key of the widget that raised `error`, when it is one the link set (read from the
    `key` argument of the innermost Streamlit frame that has one)."""
    frames = [frame for frame, _ in traceback.walk_tb(error.__traceback__)]
    for frame in reversed(frames):
        key = frame.f_locals.get("key")
        if isinstance(key, str) and key in applied:
            return [key]
    return []
