"""The plan of a corpus job: every passage tokenized once, then cut into padded batches of
passages of similar length, and the batches grouped into blocks (the unit results are written
and a job resumes by).

Passages are sorted by length within windows of SORT_WINDOW passages (so a corpus of any size is
planned in bounded memory, and a batch pads its passages to nearly their own length), the
longest first: each batch then needs no more memory than the one before, so the blocks a batch
frees hold the next batch's (models.corpus.heap keeps them between batches instead of faulting
them in anew), and a window's largest batch, which sets the job's peak, comes first. A batch
holds at most `batch_size` passages and at most CORPUS_BATCH_BYTES of one layer's maps
(B x H x T x T float32). The plan is written to the job's work folder as `texts.parquet` (one
row per passage, in batch order), `tokens.parquet` (the same rows' token ids, segments and
special positions, which the batches are built from, so no passage is tokenized twice) and
`plan.json`.

Dimensions: B batch, L layers, H query heads, Hkv key/value heads, T tokens, Dh head width.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from models.corpus.reading import CorpusFile, read_passages
from models.hooks.capture import LayerCapture, run_streamed
from models.hooks.streaming import long_limit
from models.limits import CORPUS_BATCH_BYTES, CORPUS_BATCH_SIZE

SORT_WINDOW = 4096  # passages sorted by length together
BLOCK_PASSAGES = 256  # a block is whole batches of at least this many passages
FLOAT_BYTES = 4
PLAN_FILE, TEXTS_FILE, TOKENS_FILE = "plan.json", "texts.parquet", "tokens.parquet"
PROBE_TEXT = "Attention."


@dataclass(frozen=True)
class ModelShape:
    """What the job needs to know of a model's attention: L layers of H query heads, Hkv
    key/value heads, head width Dh."""

    layers: int
    heads: int
    kv_heads: int
    head_width: int

    @property
    def num_heads(self) -> int:
        """Every head of every layer (L x H)."""
        return self.layers * self.heads


def model_shape(loaded) -> ModelShape:
    """The model's attention shape, read from one forward on a two-word text."""
    _, inputs = loaded.encode(PROBE_TEXT)
    seen: list[LayerCapture] = []
    run_streamed(loaded.model, inputs, lambda index, layer: seen.append(layer))
    first = seen[0]
    return ModelShape(layers=len(seen), heads=first.query.size(1), kv_heads=first.key.size(1),
                      head_width=first.query.size(-1))


def token_limit(loaded, max_tokens: int | None) -> int:
    """How many tokens a passage keeps: `max_tokens` (at most what the model can read at all),
    or the model's own limit for one input."""
    if max_tokens is None:
        return loaded.max_tokens
    if max_tokens < 2:
        raise ValueError("A passage must keep at least 2 tokens (--max-tokens).")
    return int(min(max_tokens, long_limit(loaded)))


@dataclass(frozen=True)
class Plan:
    """What was planned: counts, the token limit, the batches and blocks, the model's shape."""

    passages: int
    tokens: int
    truncated: int  # passages longer than the token limit, cut to it
    dropped_tokens: int
    token_limit: int
    batches: int
    blocks: int
    shape: ModelShape

    def save(self, folder: Path) -> None:
        _write_json(folder / PLAN_FILE, asdict(self))

    @classmethod
    def load(cls, folder: Path) -> Plan | None:
        """The plan in `folder`, or None when there is none (or one without its token ids,
        from an older version: planned again, to the same batches)."""
        path = folder / PLAN_FILE
        if not path.is_file() or not (folder / TOKENS_FILE).is_file():
            return None
        fields = json.loads(path.read_text(encoding="utf-8"))
        fields["shape"] = ModelShape(**fields["shape"])
        return cls(**fields)


@dataclass(frozen=True)
class PlannedTokens:
    """One passage as the plan tokenized it (models.loading.tokenize.EncodedText's ids)."""

    input_ids: tuple[int, ...]
    type_ids: tuple[int, ...] | None  # the tokenizer's token type ids, when it gave them
    segments: tuple[int, ...]
    specials: tuple[int, ...]
    dropped: int

    @classmethod
    def of(cls, encoded) -> PlannedTokens:
        types = encoded.token_type_ids
        return cls(tuple(encoded.input_ids[0].tolist()),
                   None if types is None else tuple(types[0].tolist()), encoded.segment_ids,
                   encoded.special_positions, encoded.dropped_tokens)


@dataclass(frozen=True)
class PlannedBatch:
    """One batch of passages: its number, its block, each passage's number, text, pair and
    tokens."""

    number: int
    block: int
    passages: tuple[int, ...]
    texts: tuple[str, ...]
    pairs: tuple[str | None, ...]
    tokens: tuple[PlannedTokens, ...]

    def __len__(self) -> int:
        return len(self.passages)


def batch_sizes(lengths: np.ndarray, batch_size: int, heads: int) -> list[int]:
    """How many of `lengths` (sorted, either way) each batch takes: at most `batch_size`, and at
    most CORPUS_BATCH_BYTES of one layer's (B, H, T, T) float32 maps (always at least one)."""
    sizes, start = [], 0
    while start < len(lengths):
        stop = start + 1
        while stop < len(lengths) and stop - start < batch_size and \
                (stop - start + 1) * heads * int(max(lengths[start], lengths[stop])) ** 2 \
                * FLOAT_BYTES <= CORPUS_BATCH_BYTES:
            stop += 1
        sizes.append(stop - start)
        start = stop
    return sizes


def make_plan(loaded, corpus: CorpusFile, folder: Path, batch_size: int = CORPUS_BATCH_SIZE,
              max_tokens: int | None = None, limit: int | None = None,
              most: int | None = None) -> Plan:
    """Tokenize every passage, sort and batch them, and write the plan into `folder`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if batch_size < 1:
        raise ValueError("The batch size must be at least 1 (--batch-size).")
    shape = model_shape(loaded)
    limit_tokens = token_limit(loaded, max_tokens)
    schema = pa.schema([("passage", pa.int64()), ("text", pa.string()),
                        ("text_pair", pa.string()), ("tokens", pa.int32()),
                        ("dropped_tokens", pa.int32()), ("batch", pa.int64()),
                        ("block", pa.int64())])
    ids = pa.list_(pa.int32())
    token_schema = pa.schema([("input_ids", ids), ("type_ids", pa.list_(pa.int8())),
                              ("segments", pa.list_(pa.int8())), ("specials", ids)])
    counts = {"passages": 0, "tokens": 0, "truncated": 0, "dropped": 0, "batches": 0,
              "blocks": 0}
    in_block = 0
    temporary = folder / f"{TEXTS_FILE}.partial"
    temporary_tokens = folder / f"{TOKENS_FILE}.partial"
    with pq.ParquetWriter(temporary, schema) as writer, \
            pq.ParquetWriter(temporary_tokens, token_schema) as token_writer:
        for window in _windows(read_passages(corpus, limit, most)):
            encoded = [PlannedTokens.of(item) for item in loaded.encode_many(
                [p.text for p in window], [p.pair for p in window], limit_tokens)]
            lengths = np.array([len(e.input_ids) for e in encoded])
            order = np.argsort(-lengths, kind="stable")  # the longest first (see the doc)
            rows: dict[str, list] = {name: [] for name in schema.names + token_schema.names}
            start = 0
            for size in batch_sizes(lengths[order], batch_size, shape.heads):
                if in_block >= BLOCK_PASSAGES:
                    counts["blocks"] += 1
                    in_block = 0
                for index in order[start:start + size]:
                    passage = window[index]
                    rows["passage"].append(passage.index)
                    rows["text"].append(passage.text)
                    rows["text_pair"].append(passage.pair)
                    rows["tokens"].append(int(lengths[index]))
                    rows["dropped_tokens"].append(encoded[index].dropped)
                    rows["input_ids"].append(encoded[index].input_ids)
                    rows["type_ids"].append(encoded[index].type_ids)
                    rows["segments"].append(encoded[index].segments)
                    rows["specials"].append(encoded[index].specials)
                    rows["batch"].append(counts["batches"])
                    rows["block"].append(counts["blocks"])
                counts["batches"] += 1
                in_block += size
                start += size
            writer.write_table(pa.table({name: rows[name] for name in schema.names},
                                        schema=schema))
            token_writer.write_table(pa.table({name: rows[name] for name in token_schema.names},
                                              schema=token_schema))
            counts["passages"] += len(window)
            counts["tokens"] += int(lengths.sum())
            counts["truncated"] += sum(e.dropped > 0 for e in encoded)
            counts["dropped"] += sum(e.dropped for e in encoded)
    temporary.replace(folder / TEXTS_FILE)
    temporary_tokens.replace(folder / TOKENS_FILE)
    plan = Plan(passages=counts["passages"], tokens=counts["tokens"],
                truncated=counts["truncated"], dropped_tokens=counts["dropped"],
                token_limit=limit_tokens, batches=counts["batches"], blocks=counts["blocks"] + 1,
                shape=shape)
    plan.save(folder)
    return plan


def _windows(blocks: Iterator[list]) -> Iterator[list]:
    """The passages in windows of SORT_WINDOW."""
    pending: list = []
    for block in blocks:
        pending.extend(block)
        while len(pending) >= SORT_WINDOW:
            yield pending[:SORT_WINDOW]
            pending = pending[SORT_WINDOW:]
    if pending:
        yield pending


def planned_batches(folder: Path, blocks: set[int] | None = None) -> Iterator[PlannedBatch]:
    """The planned batches in order, read from `folder`'s texts.parquet and tokens.parquet a
    few at a time (only those of `blocks` when given)."""
    current: dict[str, list] | None = None
    for row, tokens in zip(_rows(folder / TEXTS_FILE, ["passage", "text", "text_pair",
                                                        "dropped_tokens", "batch", "block"]),
                           _rows(folder / TOKENS_FILE, ["input_ids", "type_ids", "segments",
                                                        "specials"]), strict=True):
        passage, text, pair, dropped, batch, block = row
        if blocks is not None and block not in blocks:
            continue
        if current is not None and current["batch"] != batch:
            yield _batch(current)
            current = None
        if current is None:
            current = {"batch": batch, "block": block, "passages": [], "texts": [],
                       "pairs": [], "tokens": []}
        current["passages"].append(passage)
        current["texts"].append(text)
        current["pairs"].append(pair)
        ids, types, segments, specials = tokens
        current["tokens"].append(PlannedTokens(
            tuple(ids), None if types is None else tuple(types), tuple(segments),
            tuple(specials), dropped))
    if current is not None:
        yield _batch(current)


def _rows(path: Path, columns: list[str]) -> Iterator[tuple]:
    """The rows of a Parquet file's `columns`, read SORT_WINDOW at a time."""
    import pyarrow.parquet as pq

    for chunk in pq.ParquetFile(path).iter_batches(batch_size=SORT_WINDOW, columns=columns):
        values = chunk.to_pydict()
        yield from zip(*(values[name] for name in columns))


def _batch(rows: dict) -> PlannedBatch:
    return PlannedBatch(number=rows["batch"], block=rows["block"],
                        passages=tuple(rows["passages"]), texts=tuple(rows["texts"]),
                        pairs=tuple(rows["pairs"]), tokens=tuple(rows["tokens"]))


def _write_json(path: Path, value) -> None:
    """Write JSON next to `path` and move it into place, so a reader never sees half of it."""
    temporary = path.with_name(f"{path.name}.partial")
    temporary.write_text(json.dumps(value, indent=2, sort_keys=True), encoding="utf-8")
    temporary.replace(path)
