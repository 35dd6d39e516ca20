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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import BinaryIO

import numpy as np
import streamlit as st

from models.hooks.record import AttentionRecord
from models.limits import CHEAP_EXPORT_BYTES, MAX_EXPORT_BYTES
from ui.export_files import FINGERPRINTS, ExportFile, ExportTooLarge, store
from viz.export import (JSON_DECIMALS, array_npz_bound, file_stem, head_csv_bound,
                        layer_json_bound, record_npz_bound, safe_stem, write_head_csv,
                        write_head_npz, write_layer_json, write_record_npz,
                        write_thumbnails_npz)


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


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size / 1e3:.0f} kB"


def _link(found: ExportFile, export: Export) -> str:
    """An HTML link that downloads the file under its name (the page and file share an origin):
    it reads as what the file is ("⬇ Layer as JSON"), its name and purpose on hover."""
    text = html.escape(export.label[:1].upper() + export.label[1:])
    title = html.escape(f"{found.file_name}: {export.help}")
    return (f'<a href="{html.escape(found.url)}" download="{html.escape(found.file_name)}" '
            f'target="_self" title="{title}">⬇ {text}</a> ({_megabytes(found.size)})')


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
        if found is None and export.bound <= CHEAP_EXPORT_BYTES:
            found = _prepare(export)
        elif found is None and slot.button(f"Prepare {export.label}", key=key, help=export.help):
            most = _megabytes(min(export.bound, MAX_EXPORT_BYTES))
            with container.spinner(f"Writing {export.file_name} (at most {most})…"):
                found = _prepare(export)
    except ExportTooLarge:
        slot.warning(f"{export.file_name} would be larger than "
                     f"{_megabytes(MAX_EXPORT_BYTES)}, the most a download may be.")
        return
    if found is not None:
        slot.markdown(_link(found, export), unsafe_allow_html=True)


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
