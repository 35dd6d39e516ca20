"""bertviz's head view and model view as one self-contained HTML page that needs no internet.

bertviz 1.4.1 writes HTML that loads require.js from a CDN, which then loads d3 and jQuery from
the same CDN: offline, the views stay blank. Here bertviz still builds its HTML (its data layout,
its sentence-pair filter, its drawing code), and then the CDN loader is swapped for:
- d3 5.7.0 read from the `mpld3` package and jQuery 3.7.1 from `xstatic-jquery` (both on PyPI),
  inlined into the page, read from the installed packages at run time;
- a few lines that give bertviz's script the `require.config` / `requirejs([...], callback)` it
  calls, handing it those two libraries.
The attention data is rounded and written once (bertviz writes it twice: the second copy sits in
a JavaScript comment). What the user typed is escaped so that it stays text.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from importlib.metadata import distribution
from pathlib import Path

import bertviz
import numpy as np
import torch

from models.record import AttentionRecord

WEIGHT_DECIMALS = 3  # 0.001 is finer than a line's opacity can show

# Limits, measured with MiniLM's shape (6 layers x 12 heads) in headless Chromium on this shared
# 2-core machine (times vary about 2x with load). bertviz draws one SVG line per (head, query,
# key): the head view one layer at a time (12 x T^2 lines), the model view every layer (72 x T^2).
#   head view:  52 tokens 0.9-1.6 s, 64 tokens 1.6-1.8 s, 128 tokens 5-13 s, 256 tokens 24 s
#   model view: 32 tokens 1.9 s, 52 tokens 4.5-6 s, 64 tokens 6-8 s, 128 tokens 21-27 s,
#               256 tokens 179 s (the browser tab is frozen meanwhile)
# The HTML holds every layer's weights (pairs: twice, for the A/B filter); for MiniLM on real text
# it is 2.0 MB at 64 tokens, 6.6 MB at 128, 25 MB at 256 (bertviz as shipped: 13, 54, 216 MB).
MAX_TOKENS = 128  # never more, whatever the model
MAX_DRAWN_LINES = 150_000  # about 3 s to draw here when the machine is quiet
MAX_SENT_WEIGHTS = 2_500_000  # about 14 MB of HTML

HEAD_VIEW = "head"
MODEL_VIEW = "model"
VIEWS = (HEAD_VIEW, MODEL_VIEW)
MODEL_VIEW_MODE = "light"  # bertviz's model view defaults to a black background

# (distribution on PyPI, file inside it)
D3_FILE = ("mpld3", "mpld3/js/d3.v5.min.js")
JQUERY_FILE = ("xstatic-jquery", "xstatic/pkg/jquery/data/jquery.min.js")

# What bertviz 1.4.1 emits around its view; checked, so that a new bertviz fails loudly here.
CDN_LOADER = ('<script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/'
              'require.min.js"></script>')
SCRIPT_OPEN = '\n<script type="text/javascript">\n'
SCRIPT_CLOSE = "\n</script>\n"
PARAMS_MARKER = "PYTHON_PARAMS"
REQUIRE_CONFIG = re.compile(r"require\.config\(\{.*?\n\}\);\n", re.S)

# Stands in for require.js: bertviz only calls require.config and requirejs([names], callback).
LOADER_JS = """
(function () {
  var modules = {d3: window.d3, jquery: window.jQuery};
  function load(names, callback) {
    var found = names.map(function (name) {
      if (!modules[name]) { throw new Error("module not bundled: " + name); }
      return modules[name];
    });
    return callback.apply(window, found);
  }
  load.config = function () {};
  window.require = window.requirejs = load;
})();
"""
JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                "\u2028": "\\u2028", "\u2029": "\\u2029"}
PAGE_STYLE = "body { margin: 0; padding: 4px 8px; background: #fff; color: #000; }"


def head_view_html(record: AttentionRecord) -> str:
    """bertviz's head view of every layer and head, as a page that loads nothing from outside."""
    html = bertviz.head_view(_layer_tensors(record), list(_visible_tokens(record)),
                             sentence_b_start=sentence_b_start(record), html_action="return").data
    return _offline_page(html, "head_view.js")


def model_view_html(record: AttentionRecord) -> str:
    """bertviz's model view (one thumbnail per layer x head) that loads nothing from outside."""
    html = bertviz.model_view(_layer_tensors(record), list(_visible_tokens(record)),
                              sentence_b_start=sentence_b_start(record),
                              display_mode=MODEL_VIEW_MODE, html_action="return").data
    return _offline_page(html, "model_view.js")


def view_html(record: AttentionRecord, view: str) -> str:
    if view not in VIEWS:
        raise ValueError(f"unknown bertviz view {view!r}; known: {VIEWS}")
    return head_view_html(record) if view == HEAD_VIEW else model_view_html(record)


def html_bytes(html: str) -> int:
    """Size of the page as sent to the browser (UTF-8)."""
    return len(html.encode("utf-8"))


def max_tokens(record: AttentionRecord, view: str) -> int:
    """The longest input this view of this model draws without freezing the browser."""
    lines_per_token_pair = record.num_heads * (record.num_layers if view == MODEL_VIEW else 1)
    sent_per_token_pair = record.num_layers * record.num_heads * (2 if record.is_pair else 1)
    return min(MAX_TOKENS, math.isqrt(MAX_DRAWN_LINES // lines_per_token_pair),
               math.isqrt(MAX_SENT_WEIGHTS // sent_per_token_pair))


def fits(record: AttentionRecord, view: str) -> bool:
    return record.num_tokens <= max_tokens(record, view)


def sentence_b_start(record: AttentionRecord) -> int | None:
    """Index of the second sentence's first token, for a pair laid out as A then B."""
    if not record.is_pair:
        return None
    segments = np.asarray(record.segment_ids)
    start = int(np.argmax(segments > 0))
    if np.any(segments[:start] != 0) or np.any(segments[start:] == 0):
        return None  # not one block of A then one block of B: bertviz's filter cannot show it
    return start


def _visible_tokens(record: AttentionRecord) -> tuple[str, ...]:
    return tuple("␣" if token == "" or token.isspace() else token for token in record.tokens)


def _layer_tensors(record: AttentionRecord) -> list[torch.Tensor]:
    """bertviz's input: one (1, H, Q, K) tensor per layer, rounded so its JSON stays short."""
    rounded = np.round(record.weights.astype(np.float64), WEIGHT_DECIMALS)  # (L, H, Q, K)
    return [torch.from_numpy(layer)[None] for layer in rounded]  # L x (1, H, Q, K)


def _offline_page(bertviz_html: str, script_name: str) -> str:
    """Take bertviz's HTML apart and put it back together with local scripts and safe data."""
    if not bertviz_html.startswith(CDN_LOADER) or not bertviz_html.endswith(SCRIPT_CLOSE):
        raise RuntimeError("bertviz's HTML no longer has the layout this module expects")
    body, script = bertviz_html[len(CDN_LOADER):-len(SCRIPT_CLOSE)].split(SCRIPT_OPEN)
    before, between, after = _script_template(script_name)
    data_length = (len(script) - len(before) - len(between) - len(after)) // 2
    params = script[len(before):len(before) + data_length]
    if script != before + params + between + params + after:
        raise RuntimeError(f"bertviz's {script_name} no longer has the layout this module expects")
    view_script = REQUIRE_CONFIG.sub("", before, count=1) + _safe_json(params) + between + after
    return "\n".join([
        "<!DOCTYPE html>",
        '<html><head><meta charset="utf-8"><title>bertviz</title>',
        f"<style>{PAGE_STYLE}</style>",
        _script(_package_file(*D3_FILE)),
        _script(_package_file(*JQUERY_FILE)),
        _script(LOADER_JS),
        "</head><body>",
        body.strip(),
        _script(view_script),
        "</body></html>",
    ])


@lru_cache(maxsize=None)
def _script_template(script_name: str) -> tuple[str, str, str]:
    """bertviz's script split where it writes its data (twice: in code, then in a comment)."""
    text = (Path(bertviz.__file__).parent / script_name).read_text(encoding="utf-8")
    parts = text.split(PARAMS_MARKER)
    if len(parts) != 3 or len(REQUIRE_CONFIG.findall(parts[0])) != 1:
        raise RuntimeError(f"bertviz's {script_name} no longer has the layout this module expects")
    return parts[0], parts[1], parts[2]


def _safe_json(params: str) -> str:
    """bertviz's JSON with every character that could end a <script> written as a \\u escape.

    JSON has <, >, & and the two JavaScript line separators only inside strings, where the
    \\u escapes mean the same characters, so a plain replacement is exact (and costs nothing
    next to parsing megabytes of numbers).
    """
    for character, escape in JSON_ESCAPES.items():
        params = params.replace(character, escape)
    return params


@lru_cache(maxsize=None)
def _package_file(dist_name: str, relative_path: str) -> str:
    """A JavaScript file shipped inside an installed PyPI package (read, never copied here)."""
    path = Path(distribution(dist_name).locate_file(relative_path))
    if not path.is_file():
        raise FileNotFoundError(f"{relative_path} is missing: install the '{dist_name}' package")
    return path.read_text(encoding="utf-8")


def _script(code: str) -> str:
    """An inline <script>; a library's own text never closes the tag early."""
    code = re.sub(r"</(script)", r"<\\/\1", code, flags=re.I).replace("<!--", "<\\!--")
    return f"<script>{code}</script>"


def encoder_decoder_html(encoder: AttentionRecord, decoder: AttentionRecord,
                         cross: AttentionRecord, view: str) -> str:
    """bertviz's head or model view of an encoder–decoder, offline like the views above.

    bertviz's *Attention* menu then switches between the encoder's self-attention, the
    decoder's and the cross-attention (target tokens on the left, source tokens on the right).
    Its one layer menu serves all three, so when the stacks differ in depth only the first
    `shared_layers` layers of each are drawn.
    """
    if view not in VIEWS:
        raise ValueError(f"unknown bertviz view {view!r}; known: {VIEWS}")
    if cross.tokens != decoder.tokens or cross.keys != encoder.tokens:
        raise ValueError("the cross-attention must read the encoder's tokens with the decoder's")
    arguments = dict(
        encoder_attention=_layer_tensors(encoder), decoder_attention=_layer_tensors(decoder),
        cross_attention=_layer_tensors(cross), encoder_tokens=list(_visible_tokens(encoder)),
        decoder_tokens=list(_visible_tokens(decoder)), html_action="return",
        include_layers=list(range(shared_layers(encoder, decoder))),
    )
    if view == HEAD_VIEW:
        return _offline_page(bertviz.head_view(**arguments).data, "head_view.js")
    return _offline_page(bertviz.model_view(display_mode=MODEL_VIEW_MODE, **arguments).data,
                         "model_view.js")


def encoder_decoder_fits(encoder: AttentionRecord, decoder: AttentionRecord, view: str) -> bool:
    """Whether bertviz can draw this pair without freezing the browser (the longer side counts)."""
    longest = encoder if encoder.num_tokens >= decoder.num_tokens else decoder
    return max(encoder.num_tokens, decoder.num_tokens) <= max_tokens(longest, view)


def shared_layers(encoder: AttentionRecord, decoder: AttentionRecord) -> int:
    """How many layers bertviz's encoder–decoder views draw (its layer menu is shared)."""
    return min(encoder.num_layers, decoder.num_layers)
