"""Download links shared by the pages that show one head.

Each export is written to a file on the server chunk by chunk and downloaded from disk by the
browser (ui/export_files.py says why `st.download_button` is not used): server memory stays
bounded whatever the files' size and however many students click. A small export is written
the first time it is shown; a large one when its "Prepare" button is pressed. Either way it is
written once per content and shared by every session that shows the same input.
"""

from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import BinaryIO

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import streamlit as st

from models.hooks.record import AttentionRecord
from models.limits import CHEAP_EXPORT_BYTES, EXACT_MAP_TOKENS, MAX_EXPORT_BYTES
from ui.charts import PNG_SCALE, presentation, shown_figure
from ui.export_files import FINGERPRINTS, ExportFile, ExportTooLarge, store
from ui.kept import head_key, kept_figure
from viz.export import (JSON_DECIMALS, array_npz_bound, file_stem, head_csv_bound,
                        layer_json_bound, record_npz_bound, safe_stem, write_head_csv,
                        write_head_npz, write_layer_json, write_record_npz,
                        write_thumbnails_npz)
from viz.export_figures import (HTML, IMAGE_FORMATS, PNG, bertviz_svg, figure_image,
                                figures_html, title_for, titled_page)
from viz.heatmap import matrix_heatmap


@dataclass(frozen=True)
class Export:
    """One downloadable file: what it is, how to write it and what makes two the same.

    subject: the record or array the file is made from; its content digest is computed once
        (`content` yields its bytes) and, with `parts`, names the file in the store.
    """

    label: str
    help: str
    file_name: str
    subject: object
    content: Callable[[], Iterable]
    parts: tuple
    bound: int
    write: Callable[[BinaryIO], None]
    on_request: bool = False  # written only when asked, whatever its size (drawn by a browser)


def _record_content(record: AttentionRecord) -> Iterable:
    """Everything an export of `record` holds: its metadata, then every head's weights."""
    yield json.dumps([record.source, record.tokens, record.key_tokens, record.segment_ids,
                      record.special_positions, record.masks, record.dropped_tokens],
                     ensure_ascii=False).encode("utf-8")
    for layer in record.layers:
        for head in layer:
            yield np.ascontiguousarray(head)  # (Q, K)


def _array_content(weights: np.ndarray) -> Iterable:
    yield np.ascontiguousarray(weights)


def _small_digest(*values) -> str:
    """A digest of a few small values (tokens, a model's name) given with an array."""
    text = json.dumps(values, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def readable_size(size: int) -> str:
    """A file's size as a link shows it: bytes under 1 kB (a short sentence's CSV is a few
    hundred: never "0 kB"), one decimal under 10 kB, then whole kB, then MB."""
    if size < 1_000:
        return f"{size:,} bytes"
    if size < 10_000:
        return f"{size / 1e3:.1f} kB"
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size / 1e3:.0f} kB"


def _link(found: ExportFile, export: Export) -> str:
    """An HTML link that downloads the file under its name (the page and file share an origin):
    it reads as what the file is ("⬇ Layer as JSON"), its name and purpose on hover."""
    text = html.escape(export.label[:1].upper() + export.label[1:])
    title = html.escape(f"{found.file_name}: {export.help}")
    return (f'<a href="{html.escape(found.url)}" download="{html.escape(found.file_name)}" '
            f'target="_self" title="{title}">⬇ {text}</a> ({readable_size(found.size)})')


def _store_key(digest: str, export: Export) -> tuple:
    return (digest, *export.parts, export.file_name)


def _prepare(export: Export) -> ExportFile:
    digest = FINGERPRINTS.of(export.subject, export.content)
    return store().prepare(_store_key(digest, export), export.file_name, export.bound,
                           export.write)


def offer(export: Export, key: str, container=st) -> None:
    """The export's download link, once its file exists; before that, a small export is
    written at once and a large one offers a "Prepare" button, which its link replaces."""
    slot = container.empty()
    digest = FINGERPRINTS.known(export.subject)
    found = store().find(_store_key(digest, export)) if digest else None
    try:
        if found is None and export.bound <= CHEAP_EXPORT_BYTES and not export.on_request:
            found = _prepare(export)
        elif found is None and slot.button(f"Prepare {export.label}", key=key, help=export.help):
            most = readable_size(min(export.bound, MAX_EXPORT_BYTES))
            with container.spinner(f"Writing {export.file_name} (at most {most})…"):
                found = _prepare(export)
    except ExportTooLarge:
        slot.warning(f"{export.file_name} would be larger than "
                     f"{readable_size(MAX_EXPORT_BYTES)}, the most a download may be.")
        return
    if found is not None:
        slot.html(_link(found, export))  # not markdown: no HTML parser loaded in the browser


def _served() -> bool:
    """Whether this server serves static files, which every download link needs; if not, says
    so (a link would only answer "not found")."""
    if st.get_option("server.enableStaticServing"):
        return True
    st.warning("Downloads are off: this server does not serve static files. Start the app with "
               "./start.sh, which reads .streamlit/config.toml (`enableStaticServing = true`); "
               "Streamlit also turns it off when the static/ folder is over 1 GB at start.")
    return False


def export_buttons(record: AttentionRecord, layer: int, head: int, prefix: str) -> None:
    """CSV of the shown head, JSON of its layer, NPZ of every head, with tokens and model name.

    Every head at once exists only as compressed NPZ (float16 halves it); JSON covers one layer,
    rounded. Every figure's PNG is in the Plotly toolbar above it.
    """
    if not _served():
        return
    stem = file_stem(record)
    content = partial(_record_content, record)
    left, middle, right = st.columns(3)
    offer(Export("head as CSV", "This head's map: a row per query, a column per key.",
                 f"{stem}_L{layer}H{head}.csv", record, content, ("csv", layer, head),
                 head_csv_bound(record), lambda out: write_head_csv(out, record, layer, head)),
          f"{prefix}_csv", left)
    offer(Export("layer as JSON",
                 f"Every head of layer {layer}, weights rounded to {JSON_DECIMALS} decimals.",
                 f"{stem}_L{layer}.json", record, content, ("json", layer, JSON_DECIMALS),
                 layer_json_bound(record, layer), lambda out: write_layer_json(out, record, layer)),
          f"{prefix}_json", middle)
    half = right.toggle("float16 (half the size)", key=f"{prefix}_half",
                        help="Each weight keeps about 3 significant digits.")
    offer(Export("all heads as NPZ",
                 "Compressed NumPy arrays: weights (layers, heads, query, key), tokens and "
                 "metadata; np.load reads them without pickles.",
                 f"{stem}{'_float16' if half else ''}.npz", record, content, ("npz", half),
                 record_npz_bound(record, half), lambda out: write_record_npz(out, record, half)),
          f"{prefix}_npz", right)


def long_export_buttons(weights: np.ndarray, pooled: np.ndarray, tokens: tuple[str, ...],
                        source: str, layer: int, head: int, prefix: str) -> None:
    """A long input's downloads: the shown head exactly, and every head's thumbnail. Every
    layer exactly (L x H x T x T floats, 18 GB for SmolLM2 at 4,096 tokens) is not offered."""
    if not _served():
        return
    stem = safe_stem(source)
    given = _small_digest(tokens, source)
    left, right = st.columns(2)
    offer(Export("this head as NPZ (exact)",
                 "Compressed NumPy arrays: weights (query, key), tokens, metadata.",
                 f"{stem}_L{layer}H{head}_{len(tokens)}tokens.npz", weights,
                 partial(_array_content, weights), ("head-npz", given, layer, head),
                 array_npz_bound(weights, tokens, source),
                 lambda out: write_head_npz(out, weights, tokens, source, layer, head)),
          f"{prefix}_head_npz", left)
    offer(Export("every head's thumbnail as NPZ",
                 "Every layer and head max-pooled (layers, heads, q, k): the mosaic's numbers. "
                 "Exact maps of a long input exist one head at a time.",
                 f"{stem}_thumbnails_{len(tokens)}tokens.npz", pooled,
                 partial(_array_content, pooled), ("thumbnails-npz", given),
                 array_npz_bound(pooled, tokens, source),
                 lambda out: write_thumbnails_npz(out, pooled, tokens, source)),
          f"{prefix}_thumbs_npz", right)


class _Drawn:
    """What a figure's files are made from, as an object the fingerprints can follow."""

    def __init__(self, drawn):
        self.drawn = drawn


# What a figure's file may take, for the store's reservation while it is written (the store
# still stops any file at MAX_EXPORT_BYTES): an HTML page holds plotly.js (about 4.7 MB) and the
# figure's JSON; an SVG or PDF a few times the figure's JSON; a PNG at most 4 bytes a pixel.
PLOTLY_PAGE_BYTES = 5 * 10**6
VECTOR_BYTES_PER_JSON_BYTE = 4
PNG_PIXEL_BYTES = 4
MEDIA_LABELS = {"html": "page (HTML, offline)", "svg": "SVG", "pdf": "PDF", "png": "PNG"}


def _figure_bound(figure: go.Figure, figure_json: str, file_format: str, scale: float) -> int:
    if file_format == PNG:
        layout = figure.layout
        pixels = ((layout.width or pio.defaults.default_width)
                  * (layout.height or pio.defaults.default_height) * scale * scale)
        return int(pixels * PNG_PIXEL_BYTES) + len(figure_json)
    return VECTOR_BYTES_PER_JSON_BYTE * len(figure_json) + PLOTLY_PAGE_BYTES


def figure_downloads(figures: go.Figure | Sequence[go.Figure], title: str, stem: str,
                     prefix: str) -> None:
    """The shown figure(s) as an offline HTML page (all of them, plotly.js once) and the last as
    SVG, PDF and PNG (at the toolbar's scale), drawn on the server by viz.export_figures in the
    sidebar's presenter style; each written when its "Prepare" button is pressed."""
    if not _served():
        return
    figures = [figures] if isinstance(figures, go.Figure) else list(figures)
    settings = presentation()
    shown = [shown_figure(figure, settings) for figure in figures]  # as the page drew them
    last = shown[-1]
    figure_json = last.to_json()

    def content() -> Iterable:
        yield title.encode("utf-8")
        for figure in shown:
            yield figure.to_json().encode("utf-8")

    subject = _Drawn(shown)
    FINGERPRINTS.of(subject, content)  # now, so that a file already written is found
    columns = st.expander("Download this figure: HTML, SVG, PDF, PNG").columns(
        1 + len(IMAGE_FORMATS))
    offer(Export(MEDIA_LABELS[HTML], "One page that opens offline, with plotly.js inside.",
                 f"{stem}.html", subject, content, ("figure", HTML),
                 _figure_bound(last, figure_json, HTML, 1) * len(shown),
                 lambda out: out.write(figures_html(shown, title).encode("utf-8")),
                 on_request=True), f"{prefix}_{HTML}", columns[0])
    for column, file_format in zip(columns[1:], IMAGE_FORMATS):
        scale = PNG_SCALE if file_format == PNG else 1
        offer(Export(MEDIA_LABELS[file_format], "Drawn on the server by Chromium (Kaleido).",
                     f"{stem}.{file_format}", subject, content, ("figure", file_format, scale),
                     _figure_bound(last, figure_json, file_format, scale),
                     lambda out, chosen=file_format, times=scale: out.write(
                         figure_image(last, chosen, times)),
                     on_request=True), f"{prefix}_{file_format}", column)


def bertviz_downloads(page: str, title: str, stem: str, prefix: str) -> None:
    """bertviz's view as its offline page and as the SVG headless Chromium draws from it (on the
    server, when "Prepare" is pressed; the same function as `attention-explorer export`)."""
    if not _served():
        return
    titled = titled_page(page, title)
    encoded = titled.encode("utf-8")
    subject = _Drawn(encoded)
    FINGERPRINTS.of(subject, lambda: [encoded])
    left, right = st.expander("Download this view: HTML, SVG").columns(2)
    offer(Export(MEDIA_LABELS[HTML], "bertviz's view with its scripts inside: opens offline.",
                 f"{stem}.html", subject, lambda: [encoded], ("bertviz", HTML), len(encoded),
                 lambda out: out.write(encoded), on_request=True), f"{prefix}_{HTML}", left)
    offer(Export("SVG", "The drawing as bertviz shows it now (its first layer), from Chromium.",
                 f"{stem}.svg", subject, lambda: [encoded], ("bertviz", "svg"),
                 VECTOR_BYTES_PER_JSON_BYTE * len(encoded),
                 lambda out: out.write(bertviz_svg(titled)), on_request=True),
          f"{prefix}_svg", right)


def head_figure_downloads(attention, layer: int, head: int, prefix: str) -> None:
    """The head map the page shows, as files (an input short enough to be drawn exactly)."""
    if attention.num_tokens > EXACT_MAP_TOKENS:
        return
    title = f"Layer {layer} · Head {head}"
    figure = kept_figure(attention, head_key(layer, head, title),  # the page's own map
                         lambda: matrix_heatmap(attention.head(layer, head), attention.tokens,
                                                title))
    figure_downloads(figure, title_for("Attention map", attention.tokens, layer, head),
                     f"{safe_stem(attention.label)}_L{layer}H{head}_map", prefix)
