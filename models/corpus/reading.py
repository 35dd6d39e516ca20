"""Reading a corpus file into passages, a block at a time, whatever its size.

Formats, by the file's extension:
- `.txt` (or any other): plain UTF-8 text, one passage per line; or, when the file has a blank
  line between two passages, passages separated by blank lines (a passage's lines joined by
  spaces).
- `.csv`: a header with a `text` column and optionally `text_pair` (a second sentence).
- `.jsonl`: one JSON object per line with a `text` field and optionally `text_pair`.
- `.parquet`: a `text` column and optionally `text_pair`.

Passages are numbered from 0 in the file's order; empty ones are skipped (and counted). Every
mistake in the file is a CorpusInputError whose message is one sentence naming the file.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

TEXT, PAIR = "text", "text_pair"
READ_BLOCK = 1024  # passages handed on at a time
SNIFF_BYTES = 8192  # read at the start of a file to tell text from binary
HASH_CHUNK = 1 << 16  # bytes hashed at a time
FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".parquet": "parquet"}


class CorpusInputError(ValueError):
    """The corpus cannot be read; the message is one sentence naming the file and why."""


@dataclass(frozen=True)
class Passage:
    """One passage: its number in the file (from 0), its text, and an optional second sentence."""

    index: int
    text: str
    pair: str | None = None


@dataclass(frozen=True)
class CorpusFile:
    """What is known of a corpus file before it is read: its name, size and content hash."""

    path: Path
    name: str
    bytes: int
    sha256: str

    @property
    def format(self) -> str:
        return FORMATS.get(self.path.suffix.lower(), "text")


def describe(path: Path | str, name: str | None = None) -> CorpusFile:
    """The file's name, size and SHA-256; CorpusInputError when it is missing or empty.
    `name`: what the sentences call the file (the name a person uploaded it under), by default
    its own."""
    path = Path(path)
    name = name or path.name
    if not path.is_file():
        raise CorpusInputError(f"There is no corpus file at {path}.")
    size = path.stat().st_size
    if size == 0:
        raise CorpusInputError(f"The corpus file {name} is empty.")
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(HASH_CHUNK), b""):
            digest.update(chunk)
    return CorpusFile(path, name, size, digest.hexdigest())


def read_passages(source: Path | str | CorpusFile, limit: int | None = None,
                  most: int | None = None, block: int = READ_BLOCK) -> Iterator[list[Passage]]:
    """The passages of the file at `source` (or described by it), `block` at a time. `limit`:
    only the first `limit` passages; `most`: more than `most` passages is a CorpusInputError
    (an upload's bound)."""
    found = source if isinstance(source, CorpusFile) else describe(source)
    if found.format != "parquet":
        _check_text_bytes(found)
    rows = {"csv": _csv_rows, "jsonl": _jsonl_rows, "parquet": _parquet_rows}.get(
        found.format, _text_rows)(found)
    pending: list[Passage] = []
    count = 0
    try:
        for text, pair in rows:
            if not text.strip():
                continue
            if limit is not None and count >= limit:
                break
            if most is not None and count >= most:
                raise CorpusInputError(
                    f"{found.name} has more than {most:,} passages, the most this page takes: "
                    "run it with the command line (attention-explorer corpus) instead.")
            pending.append(Passage(count, text, pair if pair and pair.strip() else None))
            count += 1
            if len(pending) >= block:
                yield pending
                pending = []
    except UnicodeDecodeError as error:
        raise CorpusInputError(f"{found.name} is not UTF-8 text (byte {error.start} of a block "
                               "could not be decoded).") from None
    if pending:
        yield pending
    if count == 0:
        raise CorpusInputError(f"{found.name} holds no passage: every text in it is empty.")


def count_passages(source: Path | str | CorpusFile, limit: int | None = None,
                   most: int | None = None) -> int:
    """How many passages `read_passages` gives (reading the whole file once)."""
    return sum(len(block) for block in read_passages(source, limit, most))


def _check_text_bytes(found: CorpusFile) -> None:
    with found.path.open("rb") as handle:
        start = handle.read(SNIFF_BYTES)
    if b"\x00" in start:
        raise CorpusInputError(f"{found.name} looks like a binary file, not text: give a .txt, "
                               ".csv, .jsonl or .parquet corpus.")


def _open_text(found: CorpusFile):
    return found.path.open("r", encoding="utf-8", errors="strict", newline="")


def _paragraphs(found: CorpusFile) -> bool:
    """Whether a blank line separates two passages somewhere in the file."""
    seen_text = False
    blank_after_text = False
    with _open_text(found) as handle:
        for line in handle:
            if line.strip():
                if blank_after_text:
                    return True
                seen_text = True
            elif seen_text:
                blank_after_text = True
    return False


def _text_rows(found: CorpusFile) -> Iterator[tuple[str, None]]:
    by_paragraph = _paragraphs(found)
    with _open_text(found) as handle:
        if not by_paragraph:
            for line in handle:
                yield line.strip().lstrip("\ufeff"), None
            return
        lines: list[str] = []
        for line in handle:
            if line.strip():
                lines.append(line.strip().lstrip("\ufeff"))
            elif lines:
                yield " ".join(lines), None
                lines = []
        if lines:
            yield " ".join(lines), None


def _csv_rows(found: CorpusFile) -> Iterator[tuple[str, str | None]]:
    with _open_text(found) as handle:
        reader = csv.DictReader(handle)
        try:
            header = [name.strip().lstrip("\ufeff") for name in (reader.fieldnames or [])]
        except csv.Error as error:
            raise CorpusInputError(f"{found.name} is not a readable CSV file ({error}).") from None
        if TEXT not in header:
            raise CorpusInputError(f"{found.name} has no '{TEXT}' column (its header: "
                                   f"{', '.join(header) or 'none'}).")
        reader.fieldnames = header
        try:
            for row in reader:
                yield row.get(TEXT) or "", row.get(PAIR)
        except csv.Error as error:
            raise CorpusInputError(f"{found.name} is not a readable CSV file (line "
                                   f"{reader.line_num}: {error}).") from None


def _jsonl_rows(found: CorpusFile) -> Iterator[tuple[str, str | None]]:
    with _open_text(found) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                raise CorpusInputError(f"Line {number} of {found.name} is not a JSON object.") \
                    from None
            if not isinstance(row, dict) or not isinstance(row.get(TEXT), str):
                raise CorpusInputError(f"Line {number} of {found.name} has no '{TEXT}' field "
                                       "holding a string.")
            pair = row.get(PAIR)
            yield row[TEXT], pair if isinstance(pair, str) else None


def _parquet_rows(found: CorpusFile) -> Iterator[tuple[str, str | None]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(found.path)
    except (pa.ArrowException, OSError):
        raise CorpusInputError(f"{found.name} is not a readable Parquet file.") from None
    names = table.schema_arrow.names
    if TEXT not in names:
        raise CorpusInputError(f"{found.name} has no '{TEXT}' column (its columns: "
                               f"{', '.join(names) or 'none'}).")
    for name in (TEXT, PAIR):
        if name in names and not pa.types.is_string(table.schema_arrow.field(name).type) and \
                not pa.types.is_large_string(table.schema_arrow.field(name).type):
            raise CorpusInputError(f"The '{name}' column of {found.name} does not hold text.")
    columns = [TEXT] + ([PAIR] if PAIR in names else [])
    for batch in table.iter_batches(batch_size=READ_BLOCK, columns=columns):
        texts = batch.column(TEXT).to_pylist()
        pairs = batch.column(PAIR).to_pylist() if PAIR in names else [None] * len(texts)
        for text, pair in zip(texts, pairs):
            yield text or "", pair
