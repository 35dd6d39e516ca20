"""bertviz's neuron view, drawn by bertviz's own neuron_view.js, fed with one layer of our trace
(models/teaching/neuron_view.py) and made to run offline the way viz/bertviz_views.py makes the
head and model views run: bertviz's require.js loader from a CDN is replaced by d3 and jQuery read
from installed PyPI packages and a few lines that stand in for require.js.

The page's own body replaces the one bertviz's Python writes (which holds a layer menu): the
Streamlit page chooses the layer, so the view gets that one layer and its head menu.
"""

from __future__ import annotations

import json
from pathlib import Path

import bertviz

from viz.bertviz_views import (D3_FILE, JQUERY_FILE, LOADER_JS, PAGE_STYLE, REQUIRE_CONFIG,
                               _package_file, _safe_json, _script)
from viz.labels import display_tokens, safe_token

ROOT_ID = "bertviz-neuron"
DISPLAY_MODE = "light"
SCRIPT = "neuron_view.js"
# bertviz draws one row of boxes per token and one vector per row: beyond this the drawing is
# taller than a screen and slow to follow.
MAX_TOKENS = 40


def _view_script() -> str:
    text = (Path(bertviz.__file__).parent / SCRIPT).read_text(encoding="utf-8")
    if len(REQUIRE_CONFIG.findall(text)) != 1:
        raise RuntimeError(f"bertviz's {SCRIPT} no longer has the layout this module expects")
    return REQUIRE_CONFIG.sub("", text, count=1)


def neuron_params(inputs, head: int = 0) -> dict:
    """bertviz's `window.bertviz_params` for one layer (a models.teaching.neuron_view.NeuronInputs):
    the layout bertviz's neuron_view.get_attention returns, with one layer."""
    tokens = [token if token.strip() else "␣" for token in display_tokens(inputs.tokens)]
    return {
        "attention": {"all": {
            "attn": [inputs.weights.tolist()],
            "queries": [inputs.queries.tolist()],
            "keys": [inputs.keys.tolist()],
            "left_text": tokens,
            "right_text": tokens,
        }},
        "default_filter": "all",
        "root_div_id": ROOT_ID,
        "bidirectional": not inputs.causal,
        "display_mode": DISPLAY_MODE,
        "layer": 0,
        "head": int(head),
    }


def neuron_view_html(inputs, head: int = 0, title: str = "") -> str:
    """A self-contained page with bertviz's neuron view of one layer; nothing loaded from outside."""
    params = _safe_json(json.dumps(neuron_params(inputs, head)))
    body = (f'<div id="{ROOT_ID}" style="padding:8px;font-family:Helvetica, Arial, sans-serif;">'
            f'<span style="user-select:none"><b>{safe_token(title)}</b> Layer {inputs.layer} · '
            '<span class="dropdown-label">Head: </span><select id="att_head"></select></span>'
            '<div id="vis"></div></div>')
    return "\n".join([
        "<!DOCTYPE html>",
        '<html><head><meta charset="utf-8"><title>bertviz neuron view</title>',
        f"<style>{PAGE_STYLE}</style>",
        _script(_package_file(*D3_FILE)),
        _script(_package_file(*JQUERY_FILE)),
        _script(LOADER_JS),
        "</head><body>",
        body,
        _script(f"window.bertviz_params = {params};"),
        _script(_view_script()),
        "</body></html>",
    ])
