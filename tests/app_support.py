"""Helpers for AppTest: run the real app.py with a given sidebar input and read its figures."""

from __future__ import annotations

import ast
import base64
import json
import re
from pathlib import Path

import numpy as np

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
TIMEOUT_S = 180


def run_page(page: str | None = None, text: str | None = None, pair: str | None = None,
             state: dict | None = None) -> AppTest:
    """Run app.py (optionally switched to `pages/<page>.py`) and return the finished AppTest."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    for key, value in (state or {}).items():
        at.session_state[key] = value
    if text is not None:
        at.session_state["sb_text"] = text
    if pair is not None:
        at.session_state["sb_pair"] = pair
    if page is not None:
        at.switch_page(f"pages/{page}.py")
    at.run()
    assert_no_failure(at)
    return at


GUARD_MESSAGE = "Something went wrong while drawing this page"


def assert_no_failure(at: AppTest) -> None:
    """No exception box, and no error from app.py's guard (which turns a page's exception into
    st.error): a page that breaks after its title must fail the test."""
    assert not at.exception, [e.value for e in at.exception]
    guarded = [e.value for e in at.error if GUARD_MESSAGE in str(e.value)]
    assert not guarded, guarded


def figures(at: AppTest) -> list[dict]:
    """The Plotly figures the page rendered, as the JSON dicts sent to the browser."""
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def figure_titled(at: AppTest, words: str) -> dict:
    """The one figure on the page whose title holds `words`."""
    drawn = figures(at)
    titles = [figure["layout"].get("title", {}).get("text", "") for figure in drawn]
    matches = [figure for figure, title in zip(drawn, titles) if words in title]
    assert len(matches) == 1, (words, titles)
    return matches[0]


def texts(at: AppTest) -> str:
    """All markdown, captions, info, warnings, errors and successes on the page, joined."""
    parts = []
    for kind in ("markdown", "caption", "info", "warning", "error", "success", "text"):
        parts.extend(shown(element.value) for element in at.get(kind))
    return "\n".join(parts)


def shown(markdown: str) -> str:
    """What a reader sees of Markdown whose punctuation was escaped (ui.text.plain)."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", str(markdown))


def array(value) -> np.ndarray:
    """A Plotly JSON array: plain nested lists, or a typed array {"dtype", "bdata", "shape"}."""
    if isinstance(value, dict) and "bdata" in value:
        data = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        if shape is not None:
            shape = [int(n) for n in str(shape).split(",")] if isinstance(shape, str) else shape
            data = data.reshape(shape)
        return data
    return np.array(value, dtype=float)


def navigation_pages() -> list[str]:
    """The page files app.py's navigation lists (the pages other engineers add included; not
    the hidden alias of the default page)."""
    tree = ast.parse(Path(APP).read_text())
    return [node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "Page"
            and node.args and isinstance(node.args[0], ast.Constant)]
