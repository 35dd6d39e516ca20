"""What a researcher takes away: one head as CSV, one layer as JSON, every head as NPZ.

No export builds hundreds of MB in memory: the whole record is only offered as compressed NPZ
(optionally float16), and JSON, the heaviest text format, covers one layer rounded to
JSON_DECIMALS. At the app's limits the largest file is the decoder's NPZ (see the README).
"""

from __future__ import annotations

import io
import json
import re

import numpy as np
import pandas as pd

from models.record import AttentionRecord

FORMAT_VERSION = 2  # 2: JSON holds one layer, rounded; NPZ may hold float16
JSON_DECIMALS = 4


def head_frame(record: AttentionRecord, layer: int, head: int) -> pd.DataFrame:
    """One head's map: a row per query, a column per key, labelled "#position token"."""
    rows = [f"#{i} {t}" for i, t in enumerate(record.tokens)]
    columns = [f"#{i} {t}" for i, t in enumerate(record.keys)]
    frame = pd.DataFrame(record.head(layer, head), index=rows, columns=columns)
    frame.index.name = "query \\ key"
    return frame


def head_csv(record: AttentionRecord, layer: int, head: int) -> bytes:
    return head_frame(record, layer, head).to_csv(float_format="%.6g").encode("utf-8")


def _metadata(record: AttentionRecord) -> dict:
    return {
        "format_version": FORMAT_VERSION,
        "source": record.source,
        "tokens": list(record.tokens),
        "key_tokens": list(record.key_tokens),
        "segment_ids": list(record.segment_ids),
        "special_positions": list(record.special_positions),
        "masks": list(record.masks),
        "dropped_tokens": record.dropped_tokens,
        "shape": {"layers": record.num_layers, "heads": record.num_heads,
                  "query": record.num_tokens, "key": record.num_keys},
    }


def layer_json(record: AttentionRecord, layer: int, decimals: int = JSON_DECIMALS) -> bytes:
    """Tokens, model name, masks and one layer's weights (H, Q, K) as nested lists, rounded.

    Each head is serialised on its own, so building the file never holds the interpreter for
    more than one head's worth of work (about 0.1 s at 512 tokens).
    """
    if not 0 <= layer < record.num_layers:
        raise ValueError(f"layer {layer} is not in 0..{record.num_layers - 1}")
    header = _metadata(record) | {"layer": layer, "decimals": decimals}
    maps = record.layer(layer)  # (H, Q, K), without stacking every layer
    heads = [json.dumps(np.round(maps[head].astype(np.float64), decimals).tolist())
             for head in range(record.num_heads)]  # (Q, K) each
    text = json.dumps(header, ensure_ascii=False)[:-1] + ', "weights": [' + ", ".join(heads) + "]}"
    return text.encode("utf-8")


def record_npz(record: AttentionRecord, half_precision: bool = False) -> bytes:
    """`weights` (L, H, Q, K), float32 or float16, plus `tokens` and a `metadata` JSON string;
    compressed, and no pickles. float16 halves the file; each weight keeps 3 significant digits."""
    buffer = io.BytesIO()
    weights = record.weights.astype(np.float16) if half_precision else record.weights
    metadata = _metadata(record) | {"dtype": str(weights.dtype)}
    np.savez_compressed(
        buffer, weights=weights, tokens=np.array(record.tokens, dtype=np.str_),
        metadata=np.array(json.dumps(metadata, ensure_ascii=False)),
    )
    return buffer.getvalue()


def head_npz(weights: np.ndarray, tokens: tuple[str, ...], source: str, layer: int,
             head: int, maps: str = "exact") -> bytes:
    """One head's (Q, K) map of a long input, compressed, with its tokens and where it comes
    from; `maps` says what the numbers are ("exact", or how they were pooled)."""
    buffer = io.BytesIO()
    metadata = {"format_version": FORMAT_VERSION, "source": source, "layer": layer,
                "head": head, "maps": maps, "dtype": str(weights.dtype),
                "shape": list(weights.shape)}
    np.savez_compressed(buffer, weights=weights, tokens=np.array(tokens, dtype=np.str_),
                        metadata=np.array(json.dumps(metadata, ensure_ascii=False)))
    return buffer.getvalue()


def thumbnails_npz(pooled: np.ndarray, tokens: tuple[str, ...], source: str) -> bytes:
    """Every head's max-pooled thumbnail (L, H, q, k) of a long input, compressed."""
    buffer = io.BytesIO()
    metadata = {"format_version": FORMAT_VERSION, "source": source,
                "maps": "max-pooled: each cell is the largest weight of a block of tokens",
                "tokens": len(tokens), "shape": list(pooled.shape)}
    np.savez_compressed(buffer, weights=pooled, tokens=np.array(tokens, dtype=np.str_),
                        metadata=np.array(json.dumps(metadata, ensure_ascii=False)))
    return buffer.getvalue()


def load_npz(data: bytes) -> AttentionRecord:
    """The inverse of record_npz (allow_pickle stays off)."""
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        meta = json.loads(str(archive["metadata"]))
        return AttentionRecord(
            tokens=tuple(str(t) for t in archive["tokens"]),
            weights=archive["weights"].astype(np.float32),
            source=meta["source"], masks=tuple(meta["masks"]),
            segment_ids=tuple(meta["segment_ids"]),
            special_positions=tuple(meta["special_positions"]),
            dropped_tokens=meta["dropped_tokens"],
            key_tokens=tuple(meta.get("key_tokens", ())),
        )


def file_stem(record: AttentionRecord) -> str:
    """A filename-safe stem naming the model."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", record.source).strip("_")[:60] or "attention"
