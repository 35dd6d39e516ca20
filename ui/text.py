"""User text shown as text: Streamlit renders messages as Markdown, so escape it first."""

from __future__ import annotations

import string

_ESCAPED = {ord(c): "\\" + c for c in string.punctuation}


def plain(text: str) -> str:
    """`text` with every ASCII punctuation mark backslash-escaped, so Markdown shows it as typed
    (no links, images, emphasis, colours or icons from a model name or a sentence)."""
    return str(text).translate(_ESCAPED)
