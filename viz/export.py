"""What a researcher takes away: one head as CSV, one layer as JSON, every head as NPZ.

Every format is written piece by piece into a binary stream the caller opens (a file on disk
in the app, a BytesIO for the `bytes` helpers): JSON and NPZ a block of rows (CHUNK_NUMBERS
weights) at a time, CSV (one head) a block of rows of text at a time. Writing a file never
holds it whole, whatever its size. The whole record is only
offered as compressed NPZ (optionally float16); JSON, the heaviest text format, covers one layer
rounded to JSON_DECIMALS.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Iterable
from typing import BinaryIO

import numpy as np
import pandas as pd

from models.hooks.record import AttentionRecord

FORMAT_VERSION = 2  # 2: JSON holds one layer, rounded; NPZ may hold float16
JSON_DECIMALS = 4
CHUNK_NUMBERS = 16_384  # the weights turned into text, or compressed, at once
# Largest text of one weight in the JSON ("0.1234") and its separator (", ").
JSON_NUMBER_BYTES = len("0.1234, ")
# Largest text of one CSV cell ("%.6g" of a weight, e.g. "1.23457e-05") and its comma.
CSV_CELL_BYTES = len("1.23457e-05,")
# Deflate never grows data by more than 5 bytes per 16 KiB block; this margin covers it and the
# zip and .npy headers.
NPZ_OVERHEAD = 1.01
NPZ_HEADER_BYTES = 64 * 1024
SMALL_METADATA_CHARS = 512  # a long input's head or thumbnails: everything but the source's name


def _block_rows(keys: int) -> int:
    """Rows of `keys` weights in a block of about CHUNK_NUMBERS."""
    return max(1, CHUNK_NUMBERS // max(1, keys))


def _row_blocks(maps: np.ndarray) -> Iterable[np.ndarray]:
    """A (Q, K) map's consecutive blocks of rows (views)."""
    rows = _block_rows(maps.shape[-1])
    return (maps[start:start + rows] for start in range(0, maps.shape[0], rows))


def head_frame(record: AttentionRecord, layer: int, head: int) -> pd.DataFrame:
    """One head's map: a row per query, a column per key, labelled "#position token"."""
    rows = [f"#{i} {t}" for i, t in enumerate(record.tokens)]
    columns = [f"#{i} {t}" for i, t in enumerate(record.keys)]
    frame = pd.DataFrame(record.head(layer, head), index=rows, columns=columns)
    frame.index.name = "query \\ key"
    return frame


def write_head_csv(out: BinaryIO, record: AttentionRecord, layer: int, head: int) -> None:
    """One head's map as UTF-8 CSV; pandas writes it a block of rows at a time."""
    text = io.TextIOWrapper(out, encoding="utf-8", newline="")
    try:
        head_frame(record, layer, head).to_csv(text, float_format="%.6g",
                                               chunksize=_block_rows(record.num_keys))
        text.flush()
    finally:
        text.detach()  # the caller's stream stays open


def head_csv_bound(record: AttentionRecord) -> int:
    """At most this many bytes in `write_head_csv`'s file (a quoted label may double)."""
    labels = sum(len(f"#{i} {t}".encode()) for i, t in enumerate(record.tokens))
    labels += sum(len(f"#{i} {t}".encode()) for i, t in enumerate(record.keys))
    quotes = 2 * (record.num_tokens + record.num_keys)
    return (record.num_tokens + 1) * (record.num_keys + 1) * CSV_CELL_BYTES + 2 * labels + quotes


def head_csv(record: AttentionRecord, layer: int, head: int) -> bytes:
    buffer = io.BytesIO()
    write_head_csv(buffer, record, layer, head)
    return buffer.getvalue()


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


def _layer_header(record: AttentionRecord, layer: int, decimals: int) -> bytes:
    if not 0 <= layer < record.num_layers:
        raise ValueError(f"layer {layer} is not in 0..{record.num_layers - 1}")
    header = _metadata(record) | {"layer": layer, "decimals": decimals}
    return (json.dumps(header, ensure_ascii=False)[:-1] + ', "weights": [').encode("utf-8")


def write_layer_json(out: BinaryIO, record: AttentionRecord, layer: int,
                     decimals: int = JSON_DECIMALS) -> None:
    """Tokens, model name, masks and one layer's weights (H, Q, K) as nested lists, rounded.

    The weights are turned into text a block of rows at a time (CHUNK_NUMBERS numbers), so
    the file's text never exists whole and the interpreter is never held for long.
    """
    out.write(_layer_header(record, layer, decimals))
    maps = record.layer(layer)  # (H, Q, K), without stacking every layer
    for head in range(record.num_heads):
        out.write(b"[" if head == 0 else b", [")
        for index, block in enumerate(_row_blocks(maps[head])):  # (q, K)
            rounded = np.round(block.astype(np.float64), decimals)
            text = json.dumps(rounded.tolist())[1:-1]  # "[..], [..]": the rows, no brackets
            out.write((text if index == 0 else ", " + text).encode("utf-8"))
        out.write(b"]")
    out.write(b"]}")


def layer_json_bound(record: AttentionRecord, layer: int) -> int:
    """At most this many bytes in `write_layer_json`'s file: weights in [0, 1] rounded to four
    decimals print as at most "0.1234"."""
    rows = record.num_heads * record.num_tokens
    brackets = len("[], ") * (rows + record.num_heads) + len("]}")
    return (len(_layer_header(record, layer, JSON_DECIMALS)) + brackets
            + rows * record.num_keys * JSON_NUMBER_BYTES)


def layer_json(record: AttentionRecord, layer: int, decimals: int = JSON_DECIMALS) -> bytes:
    buffer = io.BytesIO()
    write_layer_json(buffer, record, layer, decimals)
    return buffer.getvalue()


def _npz_member(archive: zipfile.ZipFile, name: str, array: np.ndarray) -> None:
    """One small array as `name.npy`, as np.savez writes it (numpy streams 16 MiB at a time)."""
    with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
        np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)


def _npz_chunked_member(archive: zipfile.ZipFile, name: str, dtype: np.dtype,
                        shape: tuple[int, ...], chunks: Iterable[np.ndarray]) -> None:
    """One large C-ordered array as `name.npy` from `chunks`, its consecutive blocks in order:
    the array itself is never built or copied whole."""
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
              "shape": shape}
    expected, written = int(np.prod(shape)) * dtype.itemsize, 0
    with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
        np.lib.format.write_array_header_1_0(member, header)
        for chunk in chunks:
            block = np.ascontiguousarray(chunk, dtype=dtype)
            member.write(memoryview(block).cast("B"))
            written += block.nbytes
    if written != expected:
        raise ValueError(f"{name}: {written} bytes written for an array of {expected}")


def _open_npz(out: BinaryIO) -> zipfile.ZipFile:
    """A compressed archive as np.savez_compressed makes it."""
    return zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True)


def _tokens_array(tokens: tuple[str, ...]) -> np.ndarray:
    return np.array(tokens, dtype=np.str_)


def _json_array(metadata: dict) -> np.ndarray:
    return np.array(json.dumps(metadata, ensure_ascii=False))


def write_record_npz(out: BinaryIO, record: AttentionRecord, half_precision: bool = False) -> None:
    """`weights` (L, H, Q, K), float32 or float16, plus `tokens` and a `metadata` JSON string;
    compressed, and no pickles. float16 halves the file; each weight keeps 3 significant digits.

    Written a block of rows at a time from the record's layers: the (L, H, Q, K) stack, or a
    float16 copy of it, is never built.
    """
    dtype = np.dtype(np.float16 if half_precision else np.float32)
    metadata = _metadata(record) | {"dtype": str(dtype)}
    shape = (record.num_layers, record.num_heads, record.num_tokens, record.num_keys)
    blocks = (block for layer in range(record.num_layers) for head in range(record.num_heads)
              for block in _row_blocks(record.head(layer, head)))  # (q, K) each
    with _open_npz(out) as archive:
        _npz_chunked_member(archive, "weights", dtype, shape, blocks)
        _npz_member(archive, "tokens", _tokens_array(record.tokens))
        _npz_member(archive, "metadata", _json_array(metadata))


def _npz_bound(weight_bytes: int, tokens: tuple[str, ...], metadata_chars: int) -> int:
    """At most this many bytes in an NPZ of `weight_bytes` of weights, `tokens` (numpy stores a
    token in 4 bytes a character, padded to the longest) and a metadata string."""
    longest = max((len(t) for t in tokens), default=1)
    raw = weight_bytes + len(tokens) * longest * 4 + metadata_chars * 4
    return int(raw * NPZ_OVERHEAD) + NPZ_HEADER_BYTES


def record_npz_bound(record: AttentionRecord, half_precision: bool = False) -> int:
    """At most this many bytes in `write_record_npz`'s file."""
    itemsize = 2 if half_precision else 4
    metadata = json.dumps(_metadata(record) | {"dtype": "float16"}, ensure_ascii=False)
    return _npz_bound(record.nbytes // 4 * itemsize, record.tokens, len(metadata))


def array_npz_bound(weights: np.ndarray, tokens: tuple[str, ...], source: str) -> int:
    """At most this many bytes in `write_head_npz`'s or `write_thumbnails_npz`'s file (their
    metadata is the source's name and a few hundred characters more)."""
    return _npz_bound(weights.nbytes, tokens, len(source) + SMALL_METADATA_CHARS)


def record_npz(record: AttentionRecord, half_precision: bool = False) -> bytes:
    buffer = io.BytesIO()
    write_record_npz(buffer, record, half_precision)
    return buffer.getvalue()


def write_head_npz(out: BinaryIO, weights: np.ndarray, tokens: tuple[str, ...], source: str,
                   layer: int, head: int, maps: str = "exact") -> None:
    """One head's (Q, K) map of a long input, compressed, with its tokens and where it comes
    from; `maps` says what the numbers are ("exact", or how they were pooled)."""
    metadata = {"format_version": FORMAT_VERSION, "source": source, "layer": layer,
                "head": head, "maps": maps, "dtype": str(weights.dtype),
                "shape": list(weights.shape)}
    with _open_npz(out) as archive:  # a block of rows at a time: the map may be 4,096 x 4,096
        _npz_chunked_member(archive, "weights", weights.dtype, weights.shape,
                            _row_blocks(weights))
        _npz_member(archive, "tokens", _tokens_array(tokens))
        _npz_member(archive, "metadata", _json_array(metadata))


def head_npz(weights: np.ndarray, tokens: tuple[str, ...], source: str, layer: int,
             head: int, maps: str = "exact") -> bytes:
    buffer = io.BytesIO()
    write_head_npz(buffer, weights, tokens, source, layer, head, maps)
    return buffer.getvalue()


def write_thumbnails_npz(out: BinaryIO, pooled: np.ndarray, tokens: tuple[str, ...],
                         source: str) -> None:
    """Every head's max-pooled thumbnail (L, H, q, k) of a long input, compressed."""
    metadata = {"format_version": FORMAT_VERSION, "source": source,
                "maps": "max-pooled: each cell is the largest weight of a block of tokens",
                "tokens": len(tokens), "shape": list(pooled.shape)}
    with _open_npz(out) as archive:
        _npz_member(archive, "weights", pooled)
        _npz_member(archive, "tokens", _tokens_array(tokens))
        _npz_member(archive, "metadata", _json_array(metadata))


def thumbnails_npz(pooled: np.ndarray, tokens: tuple[str, ...], source: str) -> bytes:
    buffer = io.BytesIO()
    write_thumbnails_npz(buffer, pooled, tokens, source)
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
    return safe_stem(record.source)


def safe_stem(name: str) -> str:
    """A filename-safe stem for a model's name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")[:60] or "attention"
