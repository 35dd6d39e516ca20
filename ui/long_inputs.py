"""Long inputs (beyond the full-record limit) on the all-heads page: streamed once per text.

A decoder's full trace is capped (models/limits.py) because it holds every layer's T x T maps.
A long input (up to models.limits.LONG_TOKENS) is read by one streamed forward that keeps only
each layer's max-pooled thumbnails and per-head statistics in memory (models/hooks/streaming.py) and each layer's input on
disk; one head's exact map is computed on demand from its layer's input. Both are kept in the server's byte-bounded
trace store; one long forward runs at a time on the server (each holds one layer's maps, about
600 MB at 4,096 tokens on SmolLM2, while it runs).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
import threading
import uuid
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import streamlit as st

from models.analysis.summary import SummaryResult, SummaryStream
from models.store.byte_cache import release_freed_memory
from models.errors import ModelLoadError
from models.loading.source import ModelSource
from models.limits import LONG_INPUT_DISK_BYTES
from models.hooks.streaming import (LayerInputs, Streamed, exact_head, exact_layer, long_limit,
                              prepare, stream)
from models.store import stores
from models.store.keys import result_key
from ui import byte_caches, cache

_ONE_AT_A_TIME = threading.Lock()
# Each long input's per-layer inputs live in files under one folder per server process, removed
# when the process ends; at most LONG_INPUT_DISK_BYTES of them, the least recently streamed
# deleted first (their heads are then computed the slower way, from the start of the model).


@functools.cache
def _spill_root() -> Path:
    """The folder of this process's long inputs, made on the first long input (not at import)."""
    root = Path(tempfile.mkdtemp(prefix="attention-explorer-long-"))
    atexit.register(shutil.rmtree, root, True)
    return root


_SPILLS: OrderedDict[str, LayerInputs] = OrderedDict()
_SPILLS_LOCK = threading.Lock()


def _keep_on_disk(kept: LayerInputs) -> None:
    """Count a new input's files and delete the oldest inputs' files beyond the disk budget."""
    with _SPILLS_LOCK:
        _SPILLS.pop(kept.folder.name, None)  # kept again: now the newest
        _SPILLS[kept.folder.name] = kept
        sizes = {name: spill.disk_bytes for name, spill in _SPILLS.items()}
        while sum(sizes.values()) > LONG_INPUT_DISK_BYTES and len(_SPILLS) > 1:
            name, oldest = _SPILLS.popitem(last=False)
            oldest.delete()
            sizes.pop(name)


@dataclass(frozen=True)
class LongOverview:
    """What one streamed forward keeps of a long input: its tokens (and its layers' inputs, on
    disk) and the summary of its attention (models.analysis.summary: thumbnails, statistics, detector
    scores, role shares, the rollout's pooled maps)."""

    streamed: Streamed
    summary: SummaryResult

    @property
    def nbytes(self) -> int:
        ids = self.streamed.encoded.input_ids
        return self.summary.nbytes + ids.numel() * 80 + 4096  # ids, tokens and their strings

    def __getattr__(self, name: str):  # overview.pooled, .statistics, .roles, …
        if name.startswith("__") or name in ("streamed", "summary"):  # (copying, unpickling)
            raise AttributeError(name)
        return getattr(self.summary, name)


@dataclass(frozen=True)
class LongHead:
    """One head's exact (Q, K) map of a long input."""

    weights: np.ndarray

    @property
    def nbytes(self) -> int:
        return self.weights.nbytes + 4096


@dataclass(frozen=True)
class LongCount:
    """A long input's size: `tokens` read (at most `limit`), `kept` by the full trace."""

    tokens: int
    limit: int
    kept: int


def label(source: ModelSource) -> str:
    """The model's readable name."""
    return cache.loaded(source).label


def long_count(source: ModelSource, text: str, pair: str) -> LongCount | None:
    """The input's token count when it is longer than the full trace keeps and the model can
    read more; None otherwise, or when the model cannot load (the page's own path says why)."""
    if not text.strip():
        return None
    try:
        runner = cache.loaded(source)
    except (ModelLoadError, ValueError):
        return None
    limit = long_limit(runner)
    if limit <= runner.max_tokens:
        return None
    encoded, _ = prepare(runner, text, pair or None)  # tokenizing is cheap next to a forward
    count = len(encoded.tokens)
    return LongCount(count, limit, runner.max_tokens) if count > runner.max_tokens else None


def one_at_a_time(work):
    """Run `work` when no other long forward is running on the server."""
    if not _ONE_AT_A_TIME.acquire(blocking=False):
        with st.spinner("Another long input is being read on this server; yours starts when it "
                        "finishes…"):
            _ONE_AT_A_TIME.acquire()
    try:
        return work()
    finally:
        _ONE_AT_A_TIME.release()


def _forget(kept: LayerInputs) -> None:
    with _SPILLS_LOCK:
        _SPILLS.pop(kept.folder.name, None)
    kept.delete()


def overview(source: ModelSource, text: str, pair: str) -> LongOverview:
    """Every head's thumbnail for a long input, streamed once per server with a progress bar."""
    runner = cache.loaded(source)
    key = result_key("long-overview", source, runner.label, text, pair)

    def compute() -> LongOverview:
        encoded, _ = prepare(runner, text, pair or None)  # the tokens the stream will read
        bar = st.progress(0.0, text="Reading the long input layer by layer…")
        layers = getattr(runner.config, "num_hidden_layers", None)

        def progress(done: int) -> None:
            if layers:
                bar.progress(min(done / layers, 1.0),
                             text=f"Reading the long input: layer {done} of {layers}…")

        reduce = SummaryStream(encoded, runner.causal, progress)
        folder = _spill_root() / uuid.uuid4().hex
        try:
            streamed = one_at_a_time(lambda: stream(runner, text, pair or None, reduce,
                                                    keep_inputs=folder))
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        finally:
            bar.empty()
            release_freed_memory()  # the layers' maps (~1.8 GB at 4,096 tokens) are gone now
        result = LongOverview(streamed, reduce.summary(streamed))
        _keep_on_disk(streamed.layer_inputs)
        weakref.finalize(result, _forget, streamed.layer_inputs)  # dropped from memory: files go
        return result

    return byte_caches.kept(stores.TRACES, key, compute)


def head(source: ModelSource, text: str, pair: str, layer: int, head_index: int) -> np.ndarray:
    """(Q, K) exact weights of one head of a long input (the layers before it run fused
    attention; see models.hooks.streaming.exact_layer)."""
    runner = cache.loaded(source)
    key = result_key("long-head", source, runner.label, text, pair, layer, head_index)

    def compute() -> LongHead:
        streamed = overview(source, text, pair).streamed
        kept = streamed.layer_inputs
        if kept is not None and kept.has(layer):  # from the layer's own input: a fraction of a second
            return LongHead(exact_head(runner, streamed.encoded, layer, head_index, kept))
        with st.spinner(f"Computing layer {layer} on the whole input…"):
            maps = one_at_a_time(lambda: exact_layer(runner, streamed.encoded, layer, fast=True))
        return LongHead(maps[head_index].copy())  # the head alone: the layer's maps can go

    return byte_caches.kept(stores.TRACES, key, compute).weights


def kept_inputs(source: ModelSource, text: str, pair: str) -> tuple[LongOverview, LayerInputs]:
    """A long input's overview and every layer's kept input. When the disk budget has deleted
    them (other long inputs came after), one forward with a progress bar writes them again."""
    result = overview(source, text, pair)
    streamed = result.streamed
    kept = streamed.layer_inputs

    def complete() -> bool:
        return all(kept.has(layer) for layer in range(streamed.num_layers))

    if complete():
        return result, kept

    def refill() -> None:
        if complete():  # another session wrote them while this one waited
            return
        with st.spinner("This text's layer inputs were cleared to make room for others; "
                        "reading it again, layer by layer…"):
            stream(cache.loaded(source), text, pair or None, lambda layer, maps: None,
                   keep_inputs=kept.folder)
        release_freed_memory()

    one_at_a_time(refill)
    _keep_on_disk(kept)
    return result, kept
