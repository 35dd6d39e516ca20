"""A small corpus for the corpus tests: passages of different lengths (so batches carry
padding), punctuation, repeated words, and one passage far longer than a short token limit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

PASSAGES = [
    "The cat sat on the mat.",
    "A dog barked at the mailman, who ran away quickly!",
    "Time flies like an arrow; fruit flies like a banana.",
    "Birds sing.",
    "The quick brown fox jumps over the lazy dog, and the dog does not mind at all.",
    "Colourless green ideas sleep furiously.",
    "When the power failed, the whole building went quiet, and we heard the river.",
    "One, two, three: the drummer counted in.",
    "The river froze so thick that the town held its winter fair on the ice.",
    "Rain.",
    "She folded the map carefully, although she knew the roads had changed since then.",
    "Bees dance to tell one another where the flowers are, and the hive listens.",
]
NUMERIC = ["tokens"]


def write_lines(folder: Path, passages=PASSAGES) -> Path:
    path = folder / "passages.txt"
    path.write_text("\n".join(passages) + "\n", encoding="utf-8")
    return path


def tables(folder: Path) -> dict[str, pd.DataFrame]:
    return {name: pd.read_parquet(folder / f"{name}.parquet")
            for name in ("heads", "passages", "texts")}


def numeric(frame: pd.DataFrame) -> np.ndarray:
    return frame.select_dtypes("number").to_numpy(dtype=float)
