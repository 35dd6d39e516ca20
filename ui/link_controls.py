"""Which controls a page has, read once from its source: every widget whose key starts with the
page's prefix and holds one int, float, str or bool, and the controls the ui helpers it calls
draw for it (see ui/link_codec.py for what a link holds)."""

from __future__ import annotations

import ast
import functools
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from models.loading import kinds
from ui.link_codec import RESERVED


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


PAGES = Path(__file__).resolve().parents[1] / "pages"  # the app's page files
PARSING = threading.Lock()
PARSE_ATTEMPTS = 3


def syntax_tree(source: str) -> ast.Module:
    """`ast.parse(source)`, one thread of this process at a time, and parsed again after
    CPython 3.11's spurious "AST constructor recursion depth mismatch" SystemError: the
    constructor counts its depth once per interpreter, so a tree built in another thread at the
    same moment (Streamlit compiling a page for another session) can trip its check although
    both trees are right (CPython gh-106905). The lock keeps this module's parses apart; the
    next attempt outlives a collision with a parse outside it."""
    for _ in range(PARSE_ATTEMPTS - 1):
        try:
            with PARSING:
                return ast.parse(source)
        except SystemError:
            continue
    with PARSING:
        return ast.parse(source)  # the last attempt: its error is the caller's


def controls_in_source(source: str) -> PageControls:
    """The page's key prefix and its value widgets, read from its source."""
    calls = sorted((node for node in ast.walk(syntax_tree(source)) if isinstance(node, ast.Call)),
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


def read_every_page(folder: Path = PAGES) -> int:
    """Read the controls of every page file in `folder` now, into the cache `page_controls`
    reads (ui/serving.py does it before the server's first page runs); how many files."""
    files = sorted(Path(folder).glob("*.py"))
    for path in files:
        page_controls(path)
    return len(files)


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
