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

Two small scripts of our own run after bertviz's, each time it redraws: the model view's drawing
(bertviz makes it 970 px wide whatever the frame) is scaled down to fit the frame's width, and the
head view's colour squares get their head numbers (bertviz has ten colours, so with more than ten
heads two squares share a colour). A `ViewChoice` carries bertviz's `include_layers` and
`include_heads` for the model view.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import distribution
from pathlib import Path

import bertviz
import numpy as np
import torch

from models.hooks.record import AttentionRecord
from viz.labels import display_tokens

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
WINDOW_TOKENS = 64  # a longer input is drawn a window of this many tokens at a time
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

# Runs after bertviz's script and again whenever bertviz redraws into #vis (a new filter or
# layer): bertviz draws into an empty #vis, so watching #vis's children sees every redraw.
REDRAWN_JS = """
(function () {
  var vis = document.getElementById("vis");
  function decorate() { var drawing = vis.querySelector("svg"); if (drawing) { %s(drawing); } }
  %s
  decorate();
  new MutationObserver(decorate).observe(vis, {childList: true});
})();
"""
# The model view's SVG is DIV_WIDTH = 970 px wide in bertviz's model_view.js, whatever the
# frame: given a viewBox, it scales down to the frame's width and keeps its proportions.
FIT_JS = """function fit(drawing) {
    if (drawing.hasAttribute("viewBox")) { return; }
    drawing.setAttribute("viewBox", "0 0 " + drawing.getAttribute("width") + " " +
                         drawing.getAttribute("height"));
    drawing.style.maxWidth = "100%";
    drawing.style.height = "auto";
  }"""
# The head view's colour squares are the rects of the one <g> without an id that head_view.js
# appends last (drawCheckboxes); square i is head i. Its number is drawn on it, dark on a light
# halo so that it reads on every colour, and lets clicks through to the square.
NUMBER_JS = """function number(drawing) {
    var groups = drawing.querySelectorAll(":scope > g:not([id])");
    if (!groups.length) { return; }
    var squares = groups[groups.length - 1].querySelectorAll(":scope > rect");
    squares.forEach(function (square, head) {
      var size = +square.getAttribute("width");
      var label = document.createElementNS("http://www.w3.org/2000/svg", "text");
      label.textContent = String(head);
      label.setAttribute("class", "head-number");
      label.setAttribute("x", +square.getAttribute("x") + size / 2);
      label.setAttribute("y", +square.getAttribute("y") + size / 2);
      label.setAttribute("text-anchor", "middle");
      label.setAttribute("dominant-baseline", "central");
      label.setAttribute("style", "font: bold 11px sans-serif; fill: #000; stroke: #fff; " +
                         "stroke-width: 3px; paint-order: stroke; pointer-events: none;");
      square.parentNode.appendChild(label);
      var hint = document.createElementNS("http://www.w3.org/2000/svg", "title");
      hint.textContent = "head " + head + ": click to hide or show it, double-click to show " +
                         "only this head";
      square.appendChild(hint);
    });
  }"""
AFTER_DRAWING = {"head_view.js": REDRAWN_JS % ("number", NUMBER_JS),
                 "model_view.js": REDRAWN_JS % ("fit", FIT_JS)}
BERTVIZ_COLOURS = 10  # d3.schemeCategory10: head i has colour i mod 10


@dataclass(frozen=True)
class ViewChoice:
    """Which bertviz view to draw, and for the model view which layers and heads (bertviz's
    include_layers / include_heads; None = all). Hashable, so a cache can key on it."""

    kind: str = HEAD_VIEW
    layers: tuple[int, ...] | None = None
    heads: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.kind not in VIEWS:
            raise ValueError(f"unknown bertviz view {self.kind!r}; known: {VIEWS}")
        if self.kind == HEAD_VIEW and (self.layers is not None or self.heads is not None):
            raise ValueError("the head view draws one layer at a time with every head: "
                             "layers and heads are chosen only for the model view")
        for name in ("layers", "heads"):
            chosen = getattr(self, name)
            if chosen is None:
                continue
            chosen = tuple(sorted({int(index) for index in chosen}))
            if not chosen or chosen[0] < 0:
                raise ValueError(f"choose at least one of the {name}, as indices from 0")
            object.__setattr__(self, name, chosen)

    def layer_count(self, record: AttentionRecord) -> int:
        return record.num_layers if self.layers is None else len(self.layers)

    def head_count(self, record: AttentionRecord) -> int:
        return record.num_heads if self.heads is None else len(self.heads)

    def check(self, record: AttentionRecord) -> None:
        for name, chosen, count in (("layer", self.layers, record.num_layers),
                                    ("head", self.heads, record.num_heads)):
            if chosen is not None and chosen[-1] >= count:
                raise ValueError(f"{name} {chosen[-1]} does not exist: this model has {count}")


def as_choice(view: str | ViewChoice) -> ViewChoice:
    return view if isinstance(view, ViewChoice) else ViewChoice(view)


def head_view_html(record: AttentionRecord) -> str:
    """bertviz's head view of every layer and head, as a page that loads nothing from outside."""
    html = bertviz.head_view(_layer_tensors(record), list(_visible_tokens(record)),
                             sentence_b_start=sentence_b_start(record), html_action="return").data
    return _offline_page(html, "head_view.js")


def model_view_html(record: AttentionRecord, choice: ViewChoice | None = None) -> str:
    """bertviz's model view (one thumbnail per layer x head) that loads nothing from outside;
    `choice` picks the layers and heads drawn (all by default)."""
    choice = choice or ViewChoice(MODEL_VIEW)
    choice.check(record)
    html = bertviz.model_view(
        _layer_tensors(record), list(_visible_tokens(record)),
        sentence_b_start=sentence_b_start(record), display_mode=MODEL_VIEW_MODE,
        include_layers=None if choice.layers is None else list(choice.layers),
        include_heads=None if choice.heads is None else list(choice.heads),
        html_action="return").data
    return _offline_page(html, "model_view.js")


def view_html(record: AttentionRecord, view: str | ViewChoice) -> str:
    """The head view or the model view; a ViewChoice also picks the model view's layers, heads."""
    choice = as_choice(view)
    if choice.kind == HEAD_VIEW:
        return head_view_html(record)
    return model_view_html(record, choice)


def html_bytes(html: str) -> int:
    """Size of the page as sent to the browser (UTF-8)."""
    return len(html.encode("utf-8"))


def max_tokens(record: AttentionRecord, view: str | ViewChoice) -> int:
    """The longest input this view of this model draws without freezing the browser (for the
    model view, with the layers and heads chosen)."""
    choice = as_choice(view)
    layers, heads = choice.layer_count(record), choice.head_count(record)
    lines_per_token_pair = heads * (layers if choice.kind == MODEL_VIEW else 1)
    sent_per_token_pair = layers * heads * (2 if record.is_pair else 1)
    return min(MAX_TOKENS, math.isqrt(MAX_DRAWN_LINES // lines_per_token_pair),
               math.isqrt(MAX_SENT_WEIGHTS // sent_per_token_pair))


def fits(record: AttentionRecord, view: str | ViewChoice) -> bool:
    return record.num_tokens <= max_tokens(record, view)


def default_model_choice(record: AttentionRecord) -> ViewChoice:
    """The model view's layers and heads when the user has not chosen: every one if the input
    fits, else every head of as many layers as fit (spread from the first to the last layer),
    else as many heads of the first layer as fit."""
    tokens = record.num_tokens
    pairs = 2 if record.is_pair else 1
    thumbnails = min(MAX_DRAWN_LINES // tokens ** 2, MAX_SENT_WEIGHTS // (pairs * tokens ** 2))
    if thumbnails >= record.num_layers * record.num_heads:
        return ViewChoice(MODEL_VIEW)
    if thumbnails >= record.num_heads:
        spread = np.linspace(0, record.num_layers - 1, thumbnails // record.num_heads)
        return ViewChoice(MODEL_VIEW, layers=tuple(int(i) for i in np.round(spread)))
    return ViewChoice(MODEL_VIEW, layers=(0,), heads=tuple(range(max(1, thumbnails))))


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
    return tuple("␣" if token == "" or token.isspace() else token
                 for token in display_tokens(record.tokens))


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
        _script(AFTER_DRAWING[script_name]),
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
