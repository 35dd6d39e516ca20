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
COPY_BYTES = 4 * 2**20  # joined arrays are copied this many bytes at a time
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


def _write_points(folder: Path, part: int, points: EmbeddingPoints) -> None:
    """One batch's embedding sample, written as soon as it is measured (a block's whole sample
    would otherwise wait in memory for the block's last batch)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"passage": points.passage, "position": points.position,
                             "token": list(points.token)}), folder / f"{part:06d}.{POINTS}")
    np.save(folder / f"{part:06d}.{QUERIES}", points.queries)
    np.save(folder / f"{part:06d}.{KEYS}", points.keys)


def join_parquet(parts: list[Path], target: Path) -> int:
    """Write the parts' rows, in order, into one Parquet file, one part in memory at a time;
    returns the number of rows."""
    import pyarrow.parquet as pq

    writer, rows = None, 0
    try:
        for part in parts:
            table = pq.read_table(part)
            if writer is None:
                writer = pq.ParquetWriter(target, table.schema)
            writer.write_table(table)
            rows += table.num_rows
    finally:
        if writer is not None:
            writer.close()
    return rows


def _array_header(handle) -> tuple[tuple[int, ...], np.dtype]:
    """Read an open .npy file's header (leaving the handle at its data): shape and dtype."""
    read = {(1, 0): np.lib.format.read_array_header_1_0,
            (2, 0): np.lib.format.read_array_header_2_0}[np.lib.format.read_magic(handle)]
    shape, fortran, dtype = read(handle)
    if fortran:
        raise ValueError(f"{handle.name} is not in C order")
    return shape, dtype


def join_arrays(parts: list[Path], target: Path) -> None:
    """Write the parts' .npy arrays, concatenated along their first axis, into one .npy file,
    copying their bytes COPY_BYTES at a time (no part is ever read whole: memory stays flat
    whatever the corpus)."""
    headers = []
    for part in parts:
        with part.open("rb") as handle:
            headers.append(_array_header(handle))
    shape, dtype = headers[0]
    total = (sum(found[0] for found, _ in headers), *shape[1:])
    with target.open("wb") as out:
        np.lib.format.write_array_header_1_0(out, {
            "descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
            "shape": total})
        for part in parts:
            with part.open("rb") as handle:
                _array_header(handle)
                shutil.copyfileobj(handle, out, COPY_BYTES)


def read_distances(folder: Path) -> DistanceSum:
    with np.load(folder / DISTANCES) as saved:
        return DistanceSum(saved["total"], int(saved["passages"]))


class BlockWriter:
    """Takes batch results in batch order and writes each block once its last batch is in.

    A batch's embedding sample goes to the block's partial folder at once; its passage rows and
    distances (a few kB) wait for the block's end. Memory stays one batch's sample, whatever the
    block."""

    def __init__(self, work: Path):
        self.work = work
        self._block: int | None = None
        self._columns: dict[str, list[np.ndarray]] = {}
        self._distances: DistanceSum | None = None
        self._parts = 0
        self.written = 0

    def _partial(self) -> Path:
        target = block_folder(self.work, self._block)
        return target.with_name(target.name + PARTIAL)

    def add(self, result: BatchResult) -> None:
        if self._block is not None and result.block != self._block:
            if result.block < self._block:
                raise ValueError(f"batch {result.number} of block {result.block} came after "
                                 f"block {self._block}: results must come in order")
            self.flush()
        if self._block is None:
            self._block = result.block
            shutil.rmtree(self._partial(), ignore_errors=True)
            self._partial().mkdir(parents=True)
        for name, values in passage_rows(result).items():
            self._columns.setdefault(name, []).append(values)
        self._distances = result.distances if self._distances is None \
            else self._distances + result.distances
        _write_points(self._partial(), self._parts, result.points)
        self._parts += 1

    def flush(self) -> None:
        """Write the block in hand (see the module doc) and rename it complete."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if self._block is None or not self._parts:
            return
        partial = self._partial()
        pq.write_table(pa.table({name: np.concatenate(parts)
                                 for name, parts in self._columns.items()}), partial / PASSAGES)
        np.savez(partial / DISTANCES, total=self._distances.total,
                 passages=self._distances.passages)
        for name in (POINTS, QUERIES, KEYS):
            parts = [partial / f"{part:06d}.{name}" for part in range(self._parts)]
            if name == POINTS:
                join_parquet(parts, partial / name)
            else:
                join_arrays(parts, partial / name)
            for part in parts:
                part.unlink()
        partial.rename(block_folder(self.work, self._block))
        self.written += 1
        self._block, self._columns, self._distances, self._parts = None, {}, None, 0
