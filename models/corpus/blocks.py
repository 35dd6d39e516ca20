"""A job's results written block by block, so memory stays bounded and a job resumes where it
stopped.

A block is a run of consecutive batches (models.corpus.plan). Its results are written into
`blocks/NNNNNN.partial/` and the folder is renamed `blocks/NNNNNN` once every file is in it: a
block folder without the suffix is complete, and a resumed job runs only the blocks that have
none. Each block holds `passages.parquet` (models.corpus.columns), `distances.npz` (the sum of
its passages' head distances and their count), and its embedding sample: `points.parquet`
(passage, position, token), `queries.npy` and `keys.npy`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from models.corpus.batch_pass import BatchResult
from models.corpus.columns import passage_rows
from models.corpus.distances import DistanceSum
from models.corpus.embedding import EmbeddingPoints

BLOCKS = "blocks"
PARTIAL = ".partial"
PASSAGES, DISTANCES, POINTS, QUERIES, KEYS = ("passages.parquet", "distances.npz",
                                              "points.parquet", "queries.npy", "keys.npy")


def block_folder(work: Path, block: int) -> Path:
    return work / BLOCKS / f"{block:06d}"


def done_blocks(work: Path) -> set[int]:
    """The blocks whose results are all written."""
    folder = work / BLOCKS
    if not folder.is_dir():
        return set()
    return {int(path.name) for path in folder.iterdir() if path.is_dir() and path.name.isdigit()}


def write_block(work: Path, block: int, results: list[BatchResult]) -> None:
    """Write one block's batches (see the module doc)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    target = block_folder(work, block)
    partial = target.with_name(target.name + PARTIAL)
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    columns: dict[str, list[np.ndarray]] = {}
    for result in results:
        for name, values in passage_rows(result).items():
            columns.setdefault(name, []).append(values)
    pq.write_table(pa.table({name: np.concatenate(parts) for name, parts in columns.items()}),
                   partial / PASSAGES)
    distances = sum((result.distances for result in results[1:]), results[0].distances)
    np.savez(partial / DISTANCES, total=distances.total, passages=distances.passages)
    points = EmbeddingPoints.concatenate([result.points for result in results])
    pq.write_table(pa.table({"passage": points.passage, "position": points.position,
                             "token": list(points.token)}), partial / POINTS)
    np.save(partial / QUERIES, points.queries)
    np.save(partial / KEYS, points.keys)
    partial.rename(target)


def read_distances(folder: Path) -> DistanceSum:
    with np.load(folder / DISTANCES) as saved:
        return DistanceSum(saved["total"], int(saved["passages"]))


class BlockWriter:
    """Takes batch results in batch order and writes each block once its last batch is in."""

    def __init__(self, work: Path):
        self.work = work
        self._block: int | None = None
        self._results: list[BatchResult] = []
        self.written = 0

    def add(self, result: BatchResult) -> None:
        if self._block is not None and result.block != self._block:
            if result.block < self._block:
                raise ValueError(f"batch {result.number} of block {result.block} came after "
                                 f"block {self._block}: results must come in order")
            self.flush()
        self._block = result.block
        self._results.append(result)

    def flush(self) -> None:
        """Write the block in hand (the last one of a job)."""
        if self._block is not None and self._results:
            write_block(self.work, self._block, self._results)
            self.written += 1
        self._block, self._results = None, []
