"""A job's results written block by block, so memory stays bounded and a job resumes where it
stopped.

A block is a run of consecutive batches (models.corpus.plan). Its results are written into
`blocks/NNNNNN.partial/` and the folder is renamed `blocks/NNNNNN` once every file is in it: a
block folder without the suffix is complete, and a resumed job runs only the blocks that have
none. Each block holds `passages.parquet` (models.corpus.columns), `distances.npz` (the sum of
its passages' head distances and their count), and its embedding sample: `points.parquet`
(passage, position, token), `queries.npy` and `keys.npy`.

A batch's embedding sample (its largest output: a 200-passage MiniLM job writes 138 MB of
vectors) is written by one writer thread while the next batch is measured: the writing is the
kernel's copying, about a tenth of the job's time here, and it overlaps the forward instead of
adding to it. At most one batch's sample waits to be written; an error in writing it is raised
by the next `add`, `flush` or `close` (not by a `close` on the way out of the job's own error).
"""

from __future__ import annotations

import shutil
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from models.corpus.batch_pass import BatchResult
from models.corpus.columns import passage_rows
from models.corpus.distances import DistanceSum
from models.corpus.embedding import EmbeddingPoints

BLOCKS = "blocks"
PARTIAL = ".partial"
COPY_BYTES = 4 * 2**20  # joined arrays are copied this many bytes at a time
HEADER_BYTES = 128  # a .npy header written before its array's length is known
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


def array_header(shape: tuple[int, ...], dtype: np.dtype) -> bytes:
    """A .npy (format 1.0) header of HEADER_BYTES for a C-order array: always that size, so
    an array appended to part by part is written before its length is known, and its header
    rewritten in place once it is."""
    text = repr({"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                 "fortran_order": False, "shape": tuple(int(size) for size in shape)})
    prefix = np.lib.format.magic(1, 0)
    room = HEADER_BYTES - len(prefix) - 2  # the header's length, as a little-endian uint16
    if len(text) >= room:
        raise ValueError(f"an array shaped {shape} needs a longer .npy header")
    return prefix + room.to_bytes(2, "little") + (text.ljust(room - 1) + "\n").encode("latin1")


class GrowingArray:
    """A .npy file written part by part along its first axis (each part's bytes appended as they
    come), its header set to the final shape by `close()`."""

    def __init__(self, path: Path):
        self.path = path
        self._handle = path.open("wb")
        self._shape: tuple[int, ...] | None = None
        self._dtype: np.dtype | None = None
        self._handle.write(b"\0" * HEADER_BYTES)  # the header, once the shape is known

    def append(self, part: np.ndarray) -> None:
        if self._shape is None:
            self._shape, self._dtype = (0, *part.shape[1:]), part.dtype
        elif part.shape[1:] != self._shape[1:] or part.dtype != self._dtype:
            raise ValueError(f"a part shaped {part.shape} ({part.dtype}) after "
                             f"{self._shape} ({self._dtype})")
        if part.size:
            self._handle.write(memoryview(np.ascontiguousarray(part).reshape(-1)).cast("B"))
        self._shape = (self._shape[0] + part.shape[0], *self._shape[1:])

    def close(self) -> None:
        """Write the header (an empty (0,) float16 array when nothing came) and close."""
        self._handle.seek(0)
        self._handle.write(array_header(self._shape or (0,), self._dtype or np.float16))
        self._handle.close()


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

    A batch's embedding sample is appended to the block's partial files at once (points as a
    Parquet row group, queries and keys to the block's .npy files, written once); its passage
    rows and distances (a few kB) wait for the block's end. Memory stays one batch's sample,
    whatever the block."""

    def __init__(self, work: Path):
        self.work = work
        self._block: int | None = None
        self._columns: dict[str, list[np.ndarray]] = {}
        self._distances: DistanceSum | None = None
        self._points = None  # the block's pyarrow ParquetWriter, from its first batch
        self._arrays: dict[str, GrowingArray] = {}
        self._parts = 0
        self.written = 0
        self._thread: ThreadPoolExecutor | None = None  # the sample's writer, from the first
        self._pending: Future | None = None  # the batch sample being written

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
            self._arrays = {name: GrowingArray(self._partial() / name)
                            for name in (QUERIES, KEYS)}
        for name, values in passage_rows(result).items():
            self._columns.setdefault(name, []).append(values)
        self._distances = result.distances if self._distances is None \
            else self._distances + result.distances
        self._wait()
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="corpus-writer")
        self._pending = self._thread.submit(self._write_points, result.points)
        self._parts += 1

    def _wait(self, raising: bool = True) -> None:
        """Wait for the batch sample being written; raise what writing it raised (`raising`)."""
        pending, self._pending = self._pending, None
        error = None if pending is None else pending.exception()  # waits
        if error is not None and raising:
            raise error

    def close(self, quiet: bool = False) -> None:
        """Wait for the sample being written and stop the writer thread (a finished job's
        blocks are flushed first; after an error, the partial block stays partial). `quiet`:
        the job is already failing with its own error, the one to report; the write's is
        dropped."""
        try:
            self._wait(raising=not quiet)
        finally:
            if self._thread is not None:
                self._thread.shutdown()
                self._thread = None

    def _write_points(self, points: EmbeddingPoints) -> None:
        """One batch's embedding sample, written as soon as it is measured (a block's whole
        sample would otherwise wait in memory for the block's last batch); in the writer
        thread."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.table({"passage": points.passage, "position": points.position,
                          "token": pa.array(points.token, type=pa.string())})
        if self._points is None:
            self._points = pq.ParquetWriter(self._partial() / POINTS, table.schema)
        self._points.write_table(table)
        self._arrays[QUERIES].append(points.queries)
        self._arrays[KEYS].append(points.keys)

    def flush(self) -> None:
        """Write the block in hand (see the module doc) and rename it complete."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._wait()
        if self._block is None or not self._parts:
            return
        partial = self._partial()
        pq.write_table(pa.table({name: np.concatenate(parts)
                                 for name, parts in self._columns.items()}), partial / PASSAGES)
        np.savez(partial / DISTANCES, total=self._distances.total,
                 passages=self._distances.passages)
        self._points.close()
        for array in self._arrays.values():
            array.close()
        partial.rename(block_folder(self.work, self._block))
        self.written += 1
        self._block, self._columns, self._distances, self._parts = None, {}, None, 0
        self._points, self._arrays = None, {}
