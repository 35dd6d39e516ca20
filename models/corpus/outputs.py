"""A finished job's output folder, assembled from its blocks in bounded memory.

    corpus.json          the model, the corpus (name, bytes, SHA-256, passages, tokens,
                         truncated passages), the settings, the app's version; written last
    heads.parquet        one row per layer x head: label, <measure>_mean / _std / _passages
    passages.parquet     one row per passage x layer x head (models.corpus.columns)
    texts.parquet        one row per passage: passage, text, text_pair, tokens, dropped_tokens
    head_distances.npy   (L*H, L*H) mean Jensen-Shannon distance between heads
    embedding/points.parquet, queries.npy (S, L, H, Dh), keys.npy (S, L, Hkv, Dh)

Every file is written under a temporary name and moved into place; corpus.json comes last, so
a folder without it is not a finished analysis, whatever else it holds.

Dimensions: L layers, H heads, Hkv key/value heads, Dh head width, S sampled tokens.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models.analysis.statistics import head_labels
from models.corpus.blocks import (KEYS, PASSAGES, POINTS, QUERIES, block_folder, join_arrays,
                                  join_parquet, read_distances)
from models.corpus.columns import COUNT, MEAN, MEASURES, STATISTICS, STD
from models.corpus.distances import DistanceSum
from models.corpus.plan import TEXTS_FILE, Plan

SUMMARY = "corpus.json"
HEADS, ALL_PASSAGES, TEXTS = "heads.parquet", "passages.parquet", TEXTS_FILE
HEAD_DISTANCES = "head_distances.npy"
EMBEDDING = "embedding"
FORMAT = 1


@dataclass
class Moments:
    """Count, mean and sum of squared deviations of (L, H) values, merged block by block
    (Chan et al.), NaN values left out."""

    count: np.ndarray
    mean: np.ndarray
    squares: np.ndarray

    @classmethod
    def of(cls, values: np.ndarray) -> Moments:
        """From (N, L, H) values."""
        valid = ~np.isnan(values)
        count = valid.sum(axis=0)
        total = np.where(valid, values, 0.0).sum(axis=0)
        mean = np.divide(total, count, out=np.zeros_like(total), where=count > 0)
        squares = np.where(valid, (values - mean) ** 2, 0.0).sum(axis=0)
        return cls(count, mean, squares)

    def merged(self, other: Moments) -> Moments:
        count = self.count + other.count
        delta = other.mean - self.mean
        share = np.divide(other.count, count, out=np.zeros_like(delta), where=count > 0)
        return Moments(count, self.mean + delta * share,
                       self.squares + other.squares + delta ** 2 * self.count * share)

    def std(self) -> np.ndarray:
        """The standard deviation over passages (n - 1); NaN with fewer than two values."""
        return np.sqrt(np.divide(self.squares, self.count - 1,
                                 out=np.full_like(self.squares, np.nan), where=self.count > 1))

    def means(self) -> np.ndarray:
        return np.where(self.count > 0, self.mean, np.nan)


def _replace(partial: Path, target: Path) -> None:
    if target.exists():
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    partial.replace(target)


def assemble(work: Path, out: Path, plan: Plan, summary: dict) -> dict:
    """Write the output folder from the work folder's blocks, then corpus.json (`summary` and
    what assembling counted); returns what corpus.json holds."""
    import pyarrow.parquet as pq

    shape = plan.shape
    moments: dict[str, Moments] = {}
    spread = Moments.of(np.zeros((0, 1, 1)))
    distances = DistanceSum(np.zeros((shape.num_heads, shape.num_heads)), 0)
    partial = out / f"{ALL_PASSAGES}.partial"
    writer = None
    sampled = 0
    for block in range(plan.blocks):
        folder = block_folder(work, block)
        table = pq.read_table(folder / PASSAGES)
        if writer is None:
            writer = pq.ParquetWriter(partial, table.schema)
        writer.write_table(table)
        count = table.num_rows // shape.num_heads
        for name in MEASURES:
            values = table.column(name).to_numpy().reshape(count, shape.layers, shape.heads)
            found = Moments.of(values)
            moments[name] = found if name not in moments else moments[name].merged(found)
        even = table.column("even_spread_bits").to_numpy().reshape(count, -1)[:, :1, None]
        spread = spread.merged(Moments.of(even))
        distances = distances + read_distances(folder)
        sampled += pq.read_metadata(folder / POINTS).num_rows
    writer.close()
    _replace(partial, out / ALL_PASSAGES)
    _write_heads(out, shape, moments, float(spread.means().ravel()[0]))
    np.save(out / f"{HEAD_DISTANCES}.partial.npy", distances.mean())
    _replace(out / f"{HEAD_DISTANCES}.partial.npy", out / HEAD_DISTANCES)
    _write_embedding(work, out, plan)
    _replace(work / TEXTS, out / TEXTS)
    contents = {**summary, "format": FORMAT, "distance_passages": distances.passages,
                "embedded_tokens": sampled}
    temporary = out / f"{SUMMARY}.partial"
    temporary.write_text(json.dumps(contents, indent=2, sort_keys=True), encoding="utf-8")
    temporary.replace(out / SUMMARY)
    return contents


def _write_heads(out: Path, shape, moments: dict[str, Moments], even_bits: float) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    layer_index, head_index = np.meshgrid(np.arange(shape.layers), np.arange(shape.heads),
                                          indexing="ij")
    means = {source: moments[name].means()[None] for name, source in STATISTICS.items()}
    labels = head_labels(means, np.array([even_bits]))[0]  # (L, H) read from the means
    columns = {"layer": layer_index.ravel().astype(np.int32),
               "head": head_index.ravel().astype(np.int32),
               "label": [str(label) for label in labels.ravel()]}
    for name in MEASURES:
        columns[name + MEAN] = moments[name].means().ravel()
        columns[name + STD] = moments[name].std().ravel()
        columns[name + COUNT] = moments[name].count.ravel().astype(np.int64)
    partial = out / f"{HEADS}.partial"
    pq.write_table(pa.table(columns), partial)
    _replace(partial, out / HEADS)


def _write_embedding(work: Path, out: Path, plan: Plan) -> None:
    """The blocks' points, queries and keys as one file each, one block in memory at a time (a
    single block's files are the output's as they are: linked, not copied)."""
    partial = out / f"{EMBEDDING}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    folders = [block_folder(work, block) for block in range(plan.blocks)]
    if len(folders) == 1:
        for name in (POINTS, QUERIES, KEYS):
            _link(folders[0] / name, partial / name)
    else:
        join_parquet([folder / POINTS for folder in folders], partial / POINTS)
        for name in (QUERIES, KEYS):
            join_arrays([folder / name for folder in folders], partial / name)
    _replace(partial, out / EMBEDDING)


def _link(source: Path, target: Path) -> None:
    """`target` as a second name of `source` (the block stays whole should the job stop before
    its summary is written), or a copy where the file system has no links."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
