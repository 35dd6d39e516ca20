"""Labelled sentences for fine-tuning: the shipped sentiment set, or a user's CSV (text, label).

Labels are whole numbers (0, 1, … as written in the file; a CSV label such as "positive" is an
error, so a typo cannot silently become a third class). Each distinct number is one class, named
by the number itself; the shipped set names its two classes negative (0) and positive (1).

The held-out split is fixed: the shipped file has a `split` column; a user's CSV is split by a
seeded shuffle within each class (HELD_OUT_SHARE of each class held out).

Every problem raises LabelledDataError whose message is one sentence naming it; nothing is
returned for bad data, so nothing can train on it.
"""

from __future__ import annotations

import csv
import hashlib
import io
import random
from dataclasses import dataclass

from models.limits import KIB, LABELLED_CLASSES, LABELLED_ROWS, MAX_TEXT_CHARS, UPLOAD_BYTES
from pathlib import Path

SHIPPED_PATH = Path(__file__).resolve().parents[2] / "data" / "sentiment.tsv"
SHIPPED_NAME = "The app's sentiment sentences"
SHIPPED_CLASS_NAMES = ("negative", "positive")

MIN_ROWS_PER_CLASS = 4  # so every class has examples on both sides of the split
HELD_OUT_SHARE = 0.25
SPLIT_SEED = 12


class LabelledDataError(ValueError):
    """The data cannot be used for training; the message is one sentence naming the problem."""


@dataclass(frozen=True)
class LabelledData:
    """Sentences with class indices 0 … C-1 and a fixed held-out split."""

    name: str
    texts: tuple[str, ...]
    labels: tuple[int, ...]  # class index of each text
    held_out: tuple[bool, ...]  # True = not trained on, used to measure accuracy
    class_names: tuple[str, ...]

    def __post_init__(self) -> None:
        if not len(self.texts) == len(self.labels) == len(self.held_out):
            raise ValueError("texts, labels and held_out must have the same length")
        if any(not 0 <= label < len(self.class_names) for label in self.labels):
            raise ValueError("a label is not a class index")

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def part(self, held_out: bool) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """(texts, labels) of the training part (False) or of the held-out part (True)."""
        chosen = [i for i, flag in enumerate(self.held_out) if flag == held_out]
        return tuple(self.texts[i] for i in chosen), tuple(self.labels[i] for i in chosen)

    @property
    def train_size(self) -> int:
        return self.held_out.count(False)

    @property
    def held_out_size(self) -> int:
        return self.held_out.count(True)

    def class_counts(self) -> tuple[int, ...]:
        return tuple(self.labels.count(c) for c in range(self.num_classes))

    def split_counts(self, held_out: bool) -> tuple[int, ...]:
        """Sentences per class in the training part (False) or the held-out part (True)."""
        _, labels = self.part(held_out)
        return tuple(labels.count(c) for c in range(self.num_classes))

    @property
    def fingerprint(self) -> str:
        """A hash of everything training reads: texts, labels, split and class names."""
        digest = hashlib.sha256()
        for part in (self.class_names, self.texts, self.labels, self.held_out):
            digest.update(repr(part).encode("utf-8"))
        return digest.hexdigest()


def _decode(raw: bytes) -> str:
    if len(raw) > UPLOAD_BYTES:
        raise LabelledDataError(
            f"The file is {-(-len(raw) // KIB)} KB; the limit is {UPLOAD_BYTES // KIB} KB.")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise LabelledDataError(
            f"The file is not UTF-8 text (byte 0x{raw[error.start]:02x} at position "
            f"{error.start}); save it as a UTF-8 CSV.") from None


def _whole_number(text: str) -> int | None:
    text = text.strip()
    digits = text[1:] if text[:1] in "+-" else text
    return int(text) if digits.isdigit() and digits.isascii() else None


def _rows(text: str, delimiter: str) -> list[tuple[int, list[str]]]:
    """The non-blank rows, each with its line number in the file."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        rows = [(reader.line_num, row) for row in reader if any(cell.strip() for cell in row)]
    except csv.Error as error:
        raise LabelledDataError(f"The file is not valid CSV near line {reader.line_num}: "
                                f"{str(error).rstrip('.')}.") from None
    if not rows:
        raise LabelledDataError("The file has no rows.")
    return rows


def _check_rows(rows: list[tuple[int, list[str]]], columns: int) -> list[tuple[str, int]]:
    """Header handling, column count, empty texts and labels; (text, number) per row."""
    first = rows[0][1]
    start = 1 if len(first) >= 2 and _whole_number(first[1]) is None else 0
    body = rows[start:]
    if not body:
        raise LabelledDataError("The file has a header but no sentences.")
    if len(body) > LABELLED_ROWS:
        raise LabelledDataError(f"The file has {len(body)} rows; the limit is {LABELLED_ROWS}.")
    checked = []
    for number, row in body:
        if len(row) < 2 or not row[1].strip():
            raise LabelledDataError(f"Row {number} has no label.")
        if len(row) > columns:
            raise LabelledDataError(
                f"Row {number} has {len(row)} columns; the file needs {columns}: "
                f"{'text, label' if columns == 2 else 'text, label, split'}.")
        text, label = row[0].strip(), row[1].strip()
        if not text:
            raise LabelledDataError(f"Row {number} has an empty text.")
        if len(text) > MAX_TEXT_CHARS:
            raise LabelledDataError(
                f"Row {number}'s text has {len(text)} characters; the limit is {MAX_TEXT_CHARS}.")
        value = _whole_number(label)
        if value is None:
            shown = label if len(label) <= 20 else label[:20] + "…"
            raise LabelledDataError(
                f"Row {number}'s label '{shown}' is not a whole number (labels are 0, 1, …).")
        checked.append((text, value))
    return checked


def _classes(values: list[int]) -> tuple[tuple[int, ...], dict[int, int]]:
    distinct = sorted(set(values))
    if len(distinct) < 2:
        raise LabelledDataError(
            f"Every row has label {distinct[0]}; a classifier needs at least two classes.")
    if len(distinct) > LABELLED_CLASSES:
        raise LabelledDataError(
            f"The file has {len(distinct)} different labels; the limit is {LABELLED_CLASSES} "
            "classes.")
    for value in distinct:
        count = values.count(value)
        if count < MIN_ROWS_PER_CLASS:
            raise LabelledDataError(
                f"Label {value} has only {count} row{'s' if count != 1 else ''}; each class "
                f"needs at least "
                f"{MIN_ROWS_PER_CLASS}.")
    return tuple(distinct), {value: index for index, value in enumerate(distinct)}


def seeded_split(labels: tuple[int, ...], share: float = HELD_OUT_SHARE,
                 seed: int = SPLIT_SEED) -> tuple[bool, ...]:
    """Hold out `share` of each class (at least one row each), chosen by a seeded shuffle."""
    held = [False] * len(labels)
    generator = random.Random(seed)
    for label in sorted(set(labels)):
        rows = [i for i, value in enumerate(labels) if value == label]
        generator.shuffle(rows)
        for i in rows[:max(1, round(share * len(rows)))]:
            held[i] = True
    return tuple(held)


def parse_csv(raw: bytes, name: str = "your CSV") -> LabelledData:
    """A user's CSV of (text, label) rows. A first row whose label is not a whole number is taken
    as a header. Raises LabelledDataError."""
    rows = _check_rows(_rows(_decode(raw), ","), columns=2)
    values = [value for _, value in rows]
    distinct, index = _classes(values)
    labels = tuple(index[value] for value in values)
    return LabelledData(name=name, texts=tuple(text for text, _ in rows), labels=labels,
                        held_out=seeded_split(labels), class_names=tuple(str(v) for v in distinct))


def load_shipped(path: Path = SHIPPED_PATH) -> LabelledData:
    """The project's own positive/negative sentences with their fixed split column."""
    rows = _rows(_decode(path.read_bytes()), "\t")
    header = [cell.strip().lower() for cell in rows[0][1]]
    if header != ["text", "label", "split"]:
        raise LabelledDataError(f"{path.name} must start with the header text, label, split.")
    checked = _check_rows(rows, columns=3)
    splits = [row[2].strip() for _, row in rows[1:]]
    if set(splits) != {"train", "test"}:
        raise LabelledDataError(f"{path.name}'s split column must hold only train and test.")
    values = [value for _, value in checked]
    distinct, index = _classes(values)
    if distinct != (0, 1):
        raise LabelledDataError(f"{path.name} must label its sentences 0 (negative) or 1 (positive).")
    return LabelledData(name=SHIPPED_NAME, texts=tuple(text for text, _ in checked),
                        labels=tuple(index[value] for value in values),
                        held_out=tuple(split == "test" for split in splits),
                        class_names=SHIPPED_CLASS_NAMES)
