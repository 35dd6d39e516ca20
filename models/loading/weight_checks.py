"""Checks of a model's weight files, before and after a loader reads them.

Before: safetensors only (an index may not point at anything else, nor outside the folder), and
each file's header read and checked against the file's length, the tensors' data left unread.
After loading: the weights covered every parameter that shapes the attention.
The other checks (the name, the folder policy, config.json, the size) are in
models/loading/loader_checks.py.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from models.errors import ModelLoadError
from models.limits import SAFETENSORS_HEADER_BYTES
from models.loading.loader_checks import readable_bytes, reason, short_name

WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"

# Bytes per element of each safetensors dtype.
DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2,
    "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8,
}
# Parts of a model that do not change its attention: weights missing there are no reason to
# refuse it (roberta-base's checkpoint, for one, has no pooler).
OPTIONAL_PARTS = ("pooler",)


@dataclass(frozen=True)
class TensorEntry:
    dtype: str
    shape: tuple[int, ...]


def check_regular_files(name: str, folder: Path) -> None:
    """Refuse a folder holding anything but files and folders (a pipe, a device, a socket, or a
    link to one): a loader reading a pipe would wait forever, one reading /dev/zero would fill
    the memory."""
    with os.scandir(folder) as entries:
        for entry in entries:
            if not (entry.is_file() or entry.is_dir()):
                raise ModelLoadError(
                    f"Could not load '{name}': '{short_name(entry.name)}' in its folder is not a "
                    "regular file."
                )


def weight_files(name: str, folder: Path) -> tuple[Path, ...]:
    """The safetensors files a loader would read from `folder`, each checked; nothing else.

    `model.safetensors` first (transformers prefers it), else the files its index lists, which
    must all be safetensors files in the folder: an index naming a pickle (`pytorch_model.bin`)
    or a path elsewhere is refused before any loader sees it.
    """
    single = folder / WEIGHTS_FILE
    if single.is_file():
        files = (single,)
    elif (folder / WEIGHTS_INDEX).is_file():
        files = _indexed_files(name, folder)
    else:
        raise ModelLoadError(
            f"Could not load '{name}': it has no .safetensors weights ({WEIGHTS_FILE} or an "
            "index of shards), and other weight formats are not loaded because unpickling them "
            "can run arbitrary code."
        )
    if not any([safetensors_header(name, path) for path in files]):
        raise ModelLoadError(f"Could not load '{name}': its safetensors weights hold no tensors.")
    return files


def _indexed_files(name: str, folder: Path) -> tuple[Path, ...]:
    try:
        index = json.loads((folder / WEIGHTS_INDEX).read_text(encoding="utf-8"))
        shards = index["weight_map"].values() if isinstance(index["metadata"], dict) else None
        names = sorted({str(shard) for shard in shards})
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError,
            RecursionError) as error:
        raise ModelLoadError(
            f"Could not load '{name}': its {WEIGHTS_INDEX} is not a valid index of weight files."
        ) from error
    if not names:
        raise ModelLoadError(f"Could not load '{name}': its {WEIGHTS_INDEX} lists no weights.")
    for shard in names:
        if not shard.endswith(".safetensors"):
            raise ModelLoadError(
                f"Could not load '{name}': its {WEIGHTS_INDEX} points at '{short_name(shard)}', which "
                "is not a safetensors file, and other weight formats are not loaded because "
                "unpickling them can run arbitrary code."
            )
        if Path(shard).name != shard or shard.startswith("."):
            raise ModelLoadError(
                f"Could not load '{name}': its {WEIGHTS_INDEX} points at '{short_name(shard)}', "
                "outside the model's folder."
            )
        if not (folder / shard).is_file():
            raise ModelLoadError(
                f"Could not load '{name}': the weight file '{shard}' its index lists is missing."
            )
    return tuple(folder / shard for shard in names)


def safetensors_header(name: str, path: Path) -> dict[str, TensorEntry]:
    """Read and check a safetensors file's header against the file's length (data unread).

    The format: 8 bytes (little-endian header length N), N bytes of JSON naming every tensor's
    dtype, shape and byte range, then the tensors' bytes back to back.
    """
    file = path.name
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            if size < 8:
                raise ModelLoadError(
                    f"Could not load '{name}': {file} is {size} bytes long, too short to be a "
                    "safetensors file."
                )
            header_length = int.from_bytes(handle.read(8), "little")
            if header_length > SAFETENSORS_HEADER_BYTES:
                raise ModelLoadError(
                    f"Could not load '{name}': {file} is not a valid safetensors file (its "
                    f"header claims {readable_bytes(header_length)}, more than any model's)."
                )
            if 8 + header_length > size:
                raise ModelLoadError(
                    f"Could not load '{name}': {file} is cut short (it ends inside its header)."
                )
            raw = handle.read(header_length)
    except OSError as error:
        raise ModelLoadError(
            f"Could not load '{name}': {file} cannot be read ({reason(error, name, path)[:-1]})."
        ) from error
    try:
        header = json.loads(raw.decode("utf-8").rstrip(" "))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ModelLoadError(
            f"Could not load '{name}': {file} is not a valid safetensors file (its header is not "
            "JSON)."
        ) from error
    if not isinstance(header, dict):
        raise ModelLoadError(
            f"Could not load '{name}': {file} is not a valid safetensors file (its header is not "
            "a table of tensors)."
        )
    return _checked_entries(name, file, header, size - 8 - header_length)


def _checked_entries(name: str, file: str, header: dict, data_bytes: int) -> dict[str, TensorEntry]:
    entries: dict[str, TensorEntry] = {}
    end_of_data = 0
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        try:
            dtype, shape = entry["dtype"], tuple(entry["shape"])
            begin, end = entry["data_offsets"]
            width = DTYPE_BYTES[dtype]
            valid = (all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                         for n in (*shape, begin, end))
                     and end - begin == math.prod(shape) * width)
        except (KeyError, TypeError, ValueError):
            valid = False
        if not valid:
            raise ModelLoadError(
                f"Could not load '{name}': {file} is not a valid safetensors file (its entry for "
                f"'{short_name(str(key))}' is malformed)."
            )
        entries[key] = TensorEntry(dtype, shape)
        end_of_data = max(end_of_data, end)
    if end_of_data > data_bytes:
        raise ModelLoadError(
            f"Could not load '{name}': {file} is cut short (its header lists "
            f"{readable_bytes(end_of_data)} of weights, and the file holds "
            f"{readable_bytes(data_bytes)})."
        )
    return entries


def check_weights_cover(name: str, missing_keys) -> None:
    """Refuse a model whose weight files left parameters at their random initial values."""
    missing = sorted(key for key in missing_keys
                     if not any(part in key.split(".") for part in OPTIONAL_PARTS))
    if missing:
        example = missing[0]
        raise ModelLoadError(
            f"Could not load '{name}': its weights do not cover the model ({len(missing):,} "
            f"parameter tensors are missing, such as '{short_name(example)}'), so it would show "
            "randomly initialised attention."
        )
