"""What a researcher takes away: one head as CSV, the whole record as NPZ or JSON."""

from __future__ import annotations

import io
import json
import re

import numpy as np
import pandas as pd

from models.record import AttentionRecord

FORMAT_VERSION = 1


def head_frame(record: AttentionRecord, layer: int, head: int) -> pd.DataFrame:
    """One head's map: a row per query, a column per key, labelled "#position token"."""
    labels = [f"#{i} {t}" for i, t in enumerate(record.tokens)]
    frame = pd.DataFrame(record.head(layer, head), index=labels, columns=labels)
    frame.index.name = "query \\ key"
    return frame


def head_csv(record: AttentionRecord, layer: int, head: int) -> bytes:
    return head_frame(record, layer, head).to_csv(float_format="%.6g").encode("utf-8")


def _metadata(record: AttentionRecord) -> dict:
    return {
        "format_version": FORMAT_VERSION,
        "source": record.source,
        "tokens": list(record.tokens),
        "segment_ids": list(record.segment_ids),
        "special_positions": list(record.special_positions),
        "masks": list(record.masks),
        "dropped_tokens": record.dropped_tokens,
        "shape": {"layers": record.num_layers, "heads": record.num_heads,
                  "query": record.num_tokens, "key": record.num_tokens},
    }


def record_json(record: AttentionRecord) -> bytes:
    """Tokens, model name, masks and every weight (nested lists, float32 precision)."""
    payload = _metadata(record) | {"weights": record.weights.tolist()}
    return json.dumps(payload, ensure_ascii=False).encode("utf-8")


def record_npz(record: AttentionRecord) -> bytes:
    """`weights` (L, H, Q, K) float32 plus `tokens` and a `metadata` JSON string; no pickles."""
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer, weights=record.weights, tokens=np.array(record.tokens, dtype=np.str_),
        metadata=np.array(json.dumps(_metadata(record), ensure_ascii=False)),
    )
    return buffer.getvalue()


def load_npz(data: bytes) -> AttentionRecord:
    """The inverse of record_npz (allow_pickle stays off)."""
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        meta = json.loads(str(archive["metadata"]))
        return AttentionRecord(
            tokens=tuple(str(t) for t in archive["tokens"]), weights=archive["weights"],
            source=meta["source"], masks=tuple(meta["masks"]),
            segment_ids=tuple(meta["segment_ids"]),
            special_positions=tuple(meta["special_positions"]),
            dropped_tokens=meta["dropped_tokens"],
        )


def file_stem(record: AttentionRecord) -> str:
    """A filename-safe stem naming the model."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", record.source).strip("_")[:60] or "attention"
