"""Download buttons shared by the pages that show one head."""

import streamlit as st

from models.record import AttentionRecord
from viz.export import file_stem, head_csv, record_json, record_npz


def export_buttons(record: AttentionRecord, layer: int, head: int, prefix: str) -> None:
    """CSV of the shown head; NPZ and JSON of the whole record, with tokens and model name.

    The whole-record files are built only when their button is pressed (JSON at 512 tokens is
    hundreds of MB of text). Every figure's PNG is in the Plotly toolbar above it.
    """
    stem = file_stem(record)
    left, middle, right = st.columns(3)
    left.download_button("Head as CSV", head_csv(record, layer, head),
                         file_name=f"{stem}_L{layer}H{head}.csv", mime="text/csv",
                         key=f"{prefix}_csv", on_click="ignore")
    middle.download_button("All heads as NPZ", lambda: record_npz(record),
                           file_name=f"{stem}.npz", mime="application/octet-stream",
                           key=f"{prefix}_npz", on_click="ignore")
    right.download_button("All heads as JSON", lambda: record_json(record),
                          file_name=f"{stem}.json", mime="application/json",
                          key=f"{prefix}_json", on_click="ignore")
