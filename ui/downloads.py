"""Download buttons shared by the pages that show one head."""

import streamlit as st

from models.record import AttentionRecord
from viz.export import JSON_DECIMALS, file_stem, head_csv, layer_json, record_npz


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
