"""Download buttons shared by the pages that show one head."""

import re

import numpy as np
import streamlit as st

from models.record import AttentionRecord
from viz.export import (JSON_DECIMALS, file_stem, head_csv, head_npz, layer_json, record_npz,
                        thumbnails_npz)


def export_buttons(record: AttentionRecord, layer: int, head: int, prefix: str) -> None:
    """CSV of the shown head, JSON of its layer, NPZ of every head, with tokens and model name.

    Every file is built only when its button is pressed, and none is large: every head at once
    exists only as compressed NPZ (float16 halves it); JSON covers one layer, rounded. Every
    figure's PNG is in the Plotly toolbar above it.
    """
    stem = file_stem(record)
    left, middle, right = st.columns(3)
    left.download_button("Head as CSV", lambda: head_csv(record, layer, head),
                         file_name=f"{stem}_L{layer}H{head}.csv", mime="text/csv",
                         key=f"{prefix}_csv", on_click="ignore")
    middle.download_button("Layer as JSON", lambda: layer_json(record, layer),
                           file_name=f"{stem}_L{layer}.json", mime="application/json",
                           key=f"{prefix}_json", on_click="ignore",
                           help=f"Every head of layer {layer}, weights rounded to "
                                f"{JSON_DECIMALS} decimals.")
    half = right.toggle("float16 (half the size)", key=f"{prefix}_half",
                        help="Each weight keeps about 3 significant digits.")
    right.download_button("All heads as NPZ", lambda: record_npz(record, half),
                          file_name=f"{stem}{'_float16' if half else ''}.npz",
                          mime="application/octet-stream", key=f"{prefix}_npz",
                          on_click="ignore",
                          help="Compressed NumPy arrays: weights (layers, heads, query, key), "
                               "tokens and metadata; np.load reads them without pickles.")


def long_export_buttons(weights: np.ndarray, pooled: np.ndarray, tokens: tuple[str, ...],
                        source: str, layer: int, head: int, prefix: str) -> None:
    """A long input's downloads: the shown head exactly, and every head's thumbnail. Every
    layer exactly (L x H x T x T floats, 18 GB for SmolLM2 at 4,096 tokens) is not offered."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", source).strip("_")[:60] or "attention"
    left, right = st.columns(2)
    left.download_button("This head as NPZ (exact)",
                         lambda: head_npz(weights, tokens, source, layer, head),
                         file_name=f"{stem}_L{layer}H{head}_{len(tokens)}tokens.npz",
                         mime="application/octet-stream", key=f"{prefix}_head_npz",
                         on_click="ignore",
                         help="Compressed NumPy arrays: weights (query, key), tokens, metadata.")
    right.download_button("Every head's thumbnail as NPZ",
                          lambda: thumbnails_npz(pooled, tokens, source),
                          file_name=f"{stem}_thumbnails_{len(tokens)}tokens.npz",
                          mime="application/octet-stream", key=f"{prefix}_thumbs_npz",
                          on_click="ignore",
                          help="Every layer and head max-pooled (layers, heads, q, k): the mosaic's "
                               "numbers. Exact maps of a long input exist one head at a time.")
