"""Figures as files: standalone HTML, SVG, PDF and PNG, written the same way for the command line
(`attention-explorer export`) and the pages' download buttons.

- HTML of Plotly figures: one page, plotly.js inlined once however many figures it holds, nothing
  loaded from outside (no MathJax, no CDN). bertviz's views are already offline pages
  (viz.bertviz_views); they only get their title here.
- SVG, PDF, PNG of Plotly figures: Kaleido (pinned in requirements.txt) drawing with the system's
  Chromium, offline (MathJax off, plotly.js from the plotly package). One Kaleido browser is kept
  for the process: starting Chromium is most of an image's time.
- SVG of bertviz's views: the page is opened in headless Chromium, bertviz draws it, and a small
  script of ours serialises the drawn <svg> (XMLSerializer) into the page, which Chromium dumps.
  No anchor offers this (bertviz issue #13).

Every failure a user can cause is an ExportError with one sentence.
"""

from __future__ import annotations

import atexit
import html
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio

from viz.labels import display_tokens

HTML, SVG, PDF, PNG = "html", "svg", "pdf", "png"
IMAGE_FORMATS = (SVG, PDF, PNG)
FIGURE_FORMATS = (HTML, *IMAGE_FORMATS)
BERTVIZ_FORMATS = (HTML, SVG)
MEDIA_TYPES = {HTML: "text/html", SVG: "image/svg+xml", PDF: "application/pdf", PNG: "image/png"}

BROWSER_ENV = "BROWSER_PATH"  # Kaleido's own variable, read here too
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")
BROWSER_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-extensions")
RENDER_SECONDS = 90  # one image or one bertviz drawing, at most (a loaded 2-core machine)
DRAW_BUDGET_MS = 20_000  # the virtual time Chromium gives bertviz's scripts before dumping
TITLE_TOKENS = 12  # tokens named in a file's title; more end with "…"
MIN_SCALE, MAX_SCALE = 0.1, 10.0  # a PNG's scale (pixels per CSS pixel)

SVG_OUT_ID = "attention-explorer-svg"
# Runs after bertviz's scripts: the drawing, sized in pixels and standalone, as XML text.
SERIALISE_JS = """
(function () {
  var drawing = document.querySelector("#vis svg");
  var out = document.createElement("textarea");
  out.id = "%s";
  if (drawing) {
    var box = drawing.getBoundingClientRect();
    var copy = drawing.cloneNode(true);
    copy.setAttribute("xmlns", "http://www.w3.org/2000/svg");
    copy.setAttribute("width", Math.ceil(box.width));
    copy.setAttribute("height", Math.ceil(box.height));
    copy.removeAttribute("style");
    copy.setAttribute("style", "font-family: sans-serif; background: #fff");
    out.textContent = new XMLSerializer().serializeToString(copy);
  }
  document.body.appendChild(out);
})();
""" % SVG_OUT_ID


class ExportError(ValueError):
    """An export that cannot be made, with one sentence saying why."""


def title_for(view: str, tokens: Sequence[str], layer: int | None = None,
              head: int | None = None) -> str:
    """"<view> · layer L · head H · tok tok tok…": what a file shows, for its title (tokens
    as words: no byte-level or SentencePiece markers)."""
    words = display_tokens(tokens)
    shown = " ".join(words[:TITLE_TOKENS]) + (" …" if len(tokens) > TITLE_TOKENS else "")
    parts = [view]
    if layer is not None:
        parts.append(f"layer {layer}")
    if head is not None:
        parts.append(f"head {head}")
    return " · ".join([*parts, shown])


def figures_html(figures: Sequence[go.Figure], title: str) -> str:
    """One offline page holding `figures` one under the other, plotly.js inlined once."""
    if not figures:
        raise ExportError("There is no figure to write.")
    parts = [pio.to_html(figure, include_plotlyjs=index == 0, include_mathjax=False,
                         full_html=False, config={"displaylogo": False})
             for index, figure in enumerate(figures)]
    return "\n".join([
        "<!DOCTYPE html>",
        '<html><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        "</head><body>",
        *parts,
        "</body></html>",
    ])


def titled_page(page: str, title: str) -> str:
    """An offline page of viz.bertviz_views with `title` as its <title>."""
    start, end = page.find("<title>"), page.find("</title>")
    if start < 0 or end < start:
        raise ExportError("The bertviz page has no title to set.")
    return page[:start] + f"<title>{html.escape(title)}</title>" + page[end + len("</title>"):]


def browser_path() -> str:
    """The Chromium that draws images: $BROWSER_PATH, else the first browser on the PATH."""
    chosen = os.environ.get(BROWSER_ENV)
    if chosen:
        if not Path(chosen).is_file():
            raise ExportError(f"{BROWSER_ENV} is {chosen}, which is not a file: point it at a "
                              "Chromium or Chrome executable.")
        return chosen
    for name in BROWSER_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise ExportError("SVG, PDF and PNG files are drawn by Chromium, which is not installed: "
                      "install it (Debian: apt-get install chromium) or set BROWSER_PATH.")


class _Kaleido:
    """One Kaleido browser for the process, started on first use and closed at exit."""

    def __init__(self):
        self._lock = threading.Lock()
        self._started = False

    def image(self, figure: go.Figure, file_format: str, scale: float) -> bytes:
        import kaleido

        with self._lock:
            if not self._started:
                os.environ.setdefault(BROWSER_ENV, browser_path())
                kaleido.start_sync_server(n=1, timeout=RENDER_SECONDS, mathjax=False,
                                          silence_warnings=True)
                atexit.register(kaleido.stop_sync_server, silence_warnings=True)
                self._started = True
        layout = figure.layout
        options = {"format": file_format, "scale": scale,
                   "width": layout.width or pio.defaults.default_width,
                   "height": layout.height or pio.defaults.default_height}
        return kaleido.calc_fig_sync(figure.to_dict(), opts=options)


_KALEIDO = _Kaleido()


def figure_image(figure: go.Figure, file_format: str, scale: float = 1.0) -> bytes:
    """`figure` as SVG, PDF or PNG bytes; `scale` multiplies a PNG's pixels (and the others'
    nominal size)."""
    if file_format not in IMAGE_FORMATS:
        raise ExportError(f"'{file_format}' is not an image format: use one of "
                          f"{', '.join(IMAGE_FORMATS)}.")
    if not MIN_SCALE <= scale <= MAX_SCALE:
        raise ExportError(f"The scale must be between {MIN_SCALE} and {MAX_SCALE}, not {scale}.")
    browser_path()  # a missing browser is one sentence, before Kaleido tries
    try:
        return _KALEIDO.image(figure, file_format, scale)
    except ExportError:
        raise
    except Exception as error:  # Kaleido's and the browser's failures, said in one sentence
        raise ExportError(f"Chromium could not draw the figure as {file_format.upper()} "
                          f"({type(error).__name__}: {error}).") from None


def bertviz_svg(page: str) -> bytes:
    """The SVG bertviz draws from `page` (an offline page of viz.bertviz_views), drawn by
    headless Chromium and serialised from the page."""
    marker = "</body>"
    if marker not in page:
        raise ExportError("The bertviz page has no body to draw.")
    drawn = page.replace(marker, f"<script>{SERIALISE_JS}</script>{marker}", 1)
    with tempfile.TemporaryDirectory(prefix="attention-explorer-svg-") as folder:
        path = Path(folder) / "view.html"
        path.write_text(drawn, encoding="utf-8")
        try:
            result = subprocess.run(
                [browser_path(), *BROWSER_FLAGS, f"--virtual-time-budget={DRAW_BUDGET_MS}",
                 "--dump-dom", path.as_uri()],
                capture_output=True, timeout=RENDER_SECONDS, check=False)
        except subprocess.TimeoutExpired:
            raise ExportError(f"Chromium did not draw the bertviz view within "
                              f"{RENDER_SECONDS} s.") from None
    dom = result.stdout.decode("utf-8", errors="replace")
    opening = f'<textarea id="{SVG_OUT_ID}">'
    start = dom.find(opening)
    end = dom.find("</textarea>", start)
    svg = html.unescape(dom[start + len(opening):end]) if start >= 0 and end > start else ""
    if not svg.startswith("<svg"):
        raise ExportError("Chromium opened the bertviz view but it drew nothing to save as SVG.")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n' + svg).encode("utf-8")
