"""Reading a finished corpus analysis (models.corpus.outputs): the heads' table, a head's
passages (its most typical and most extreme), the head distances, a head's queries and keys.

A folder written on a cluster opens here the same as one written by the page. Every read takes
what it needs (one head's rows, a few passages' texts) rather than the whole folder.

Dimensions: L layers, H heads, Hkv key/value heads, S sampled tokens, Dh head width.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from models.corpus.blocks import KEYS, POINTS, QUERIES
from models.corpus.columns import MEAN, MEASURES
from models.corpus.outputs import (ALL_PASSAGES, EMBEDDING, FORMAT, HEAD_DISTANCES, HEADS,
                                   SUMMARY, TEXTS)
from models.corpus.plan import ModelShape

PICKS = 5  # passages shown as typical, highest and lowest


@dataclass(frozen=True)
class PassagePicks:
    """A head's passages by one measure: closest to its corpus mean, highest, lowest."""

    measure: str
    mean: float
    typical: pd.DataFrame
    highest: pd.DataFrame
    lowest: pd.DataFrame


@dataclass(frozen=True)
class HeadPoints:
    """One head's sampled queries and keys (the same S tokens), and where each token is."""

    queries: np.ndarray  # (S, Dh) float32
    keys: np.ndarray  # (S, Dh) float32
    passage: np.ndarray  # (S,)
    position: np.ndarray  # (S,)
    token: np.ndarray  # (S,) str


@dataclass(frozen=True)
class CorpusResult:
    """A finished analysis folder and its corpus.json."""

    folder: Path
    summary: dict

    @classmethod
    def open(cls, folder: Path | str) -> CorpusResult:
        """ValueError with one sentence when `folder` holds no finished analysis."""
        folder = Path(folder)
        path = folder / SUMMARY
        if not path.is_file():
            raise ValueError(f"{folder} holds no finished corpus analysis (it has no "
                             f"{SUMMARY}).")
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise ValueError(f"The {SUMMARY} in {folder} cannot be read.") from None
        if summary.get("format") != FORMAT:
            raise ValueError(f"{folder} was written by another version of the corpus job "
                             f"(format {summary.get('format')}, this one reads {FORMAT}).")
        missing = [name for name in (HEADS, ALL_PASSAGES, TEXTS, HEAD_DISTANCES, EMBEDDING)
                   if not (folder / name).exists()]
        if missing:
            raise ValueError(f"{folder} is missing {', '.join(missing)}.")
        return cls(folder, summary)

    @property
    def shape(self) -> ModelShape:
        model = self.summary["model"]
        return ModelShape(model["layers"], model["heads"], model["kv_heads"],
                          model["head_width"])

    @property
    def model_label(self) -> str:
        return self.summary["model"]["label"]

    @property
    def corpus_name(self) -> str:
        return self.summary["corpus"]["name"]

    @property
    def passages(self) -> int:
        return int(self.summary["corpus"]["passages"])

    @cached_property
    def heads(self) -> pd.DataFrame:
        """One row per layer x head (heads.parquet)."""
        return pd.read_parquet(self.folder / HEADS)

    def head_passages(self, layer: int, head: int) -> pd.DataFrame:
        """One row per passage for one head: passage, tokens and every measure."""
        self._check(layer, head)
        return pd.read_parquet(self.folder / ALL_PASSAGES,
                               filters=[("layer", "==", layer), ("head", "==", head)])

    def texts(self, passages) -> pd.DataFrame:
        """passage, text, text_pair, tokens, dropped_tokens of the passages numbered."""
        chosen = [int(p) for p in passages]
        if not chosen:
            return pd.read_parquet(self.folder / TEXTS).iloc[:0]
        return pd.read_parquet(self.folder / TEXTS, filters=[("passage", "in", chosen)],
                               columns=["passage", "text", "text_pair", "tokens",
                                        "dropped_tokens"])

    def picks(self, layer: int, head: int, measure: str, count: int = PICKS) -> PassagePicks:
        """The head's passages closest to its mean of `measure`, and its highest and lowest."""
        if measure not in MEASURES:
            raise ValueError(f"'{measure}' is not a measure: use one of {', '.join(MEASURES)}.")
        rows = self.head_passages(layer, head)[["passage", "tokens", measure]].dropna()
        mean = float(self.heads.query("layer == @layer and head == @head")[
            measure + MEAN].iloc[0])
        texts = self.texts(rows["passage"]) if len(rows) <= count * 3 else None

        def with_texts(chosen: pd.DataFrame) -> pd.DataFrame:
            found = texts if texts is not None else self.texts(chosen["passage"])
            return chosen.merge(found[["passage", "text", "text_pair"]], on="passage",
                                how="left").reset_index(drop=True)

        distance = (rows[measure] - mean).abs()
        return PassagePicks(
            measure=measure, mean=mean,
            typical=with_texts(rows.loc[distance.sort_values(kind="stable").index[:count]]),
            highest=with_texts(rows.sort_values(measure, ascending=False, kind="stable")
                               .head(count)),
            lowest=with_texts(rows.sort_values(measure, kind="stable").head(count)))

    def distances(self) -> np.ndarray:
        """(L*H, L*H) the mean Jensen-Shannon distance between heads (layer-major)."""
        return np.load(self.folder / HEAD_DISTANCES)

    def head_points(self, layer: int, head: int) -> HeadPoints:
        """One head's sampled queries and keys (its key head's, with grouped-query attention)."""
        self._check(layer, head)
        shape = self.shape
        folder = self.folder / EMBEDDING
        queries = np.load(folder / QUERIES, mmap_mode="r")[:, layer, head]  # (S, Dh)
        key_head = head // (shape.heads // shape.kv_heads)
        keys = np.load(folder / KEYS, mmap_mode="r")[:, layer, key_head]
        points = pd.read_parquet(folder / POINTS)
        return HeadPoints(np.asarray(queries, dtype=np.float32),
                          np.asarray(keys, dtype=np.float32), points["passage"].to_numpy(),
                          points["position"].to_numpy(), points["token"].to_numpy())

    def _check(self, layer: int, head: int) -> None:
        shape = self.shape
        if not (0 <= layer < shape.layers and 0 <= head < shape.heads):
            raise ValueError(f"Layer {layer}, head {head} is not in a model with "
                             f"{shape.layers} layers of {shape.heads} heads.")
