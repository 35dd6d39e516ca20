"""The sidebar's input as one attention access (models/hooks/access.py), whatever its length.

Pages ask `current()` for an `Attention` and read heads, rows, windows, reductions and
predictions from it; whether the input was kept whole or read layer by layer is decided here,
once, by the sidebar's setting (`READ_ALL`), never by a page. A text longer than the model's
full trace (352 tokens for SmolLM2) is read up to its first 352 tokens with every map kept, or,
with the setting on, whole (up to models.limits.LONG_TOKENS) by one streamed forward: each
layer's maps are reduced as soon as they exist and let go, each layer's input is written to disk,
and any head, row or window is computed again from its layer's input when a view asks.

The streamed forward runs once per text for the whole server, with a progress bar, and one at a
time (each holds one layer's maps, about 600 MB at 4,096 tokens on SmolLM2): other sessions wait
in a line (`WaitingLine`), see their place in it and may cancel. Its result, and every head, row
or window computed from it, is kept in the byte-bounded trace store.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
import threading
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import streamlit as st

from models.analysis.summary import SummaryResult
from models.errors import ModelLoadError
from models.hooks.access import Attention, StreamedAttention, WholeAttention, read_streamed
from models.hooks.layer_inputs import LayerInputs
from models.hooks.streaming import Streamed, long_limit, prepare, stream
from models.limits import LONG_INPUT_DISK_BYTES
from models.loading.source import LoadedSource, ModelSource
from models.store.byte_cache import release_freed_memory
from models.store import stores
from models.store.keys import result_key
from models.threads import one_forward_threads, torch_threads
from ui import cache
from ui.byte_caches import kept
from ui.shutdown import on_shutdown
from ui.state import current_trace, loaded_source, sidebar_input
from ui.text import plain

READ_ALL = "sb_read_all"  # session key: read a long text whole, layer by layer
CANCELLED = "long_read_cancelled"  # session key: the session left the line of long reads
CANCEL_KEY = "long_read_cancel"  # the waiting session's Cancel button
WAIT_POLL_S = 0.5  # how often a waiting session's place is shown again (and its run may stop)
Value = TypeVar("Value")
_SPILLS: OrderedDict[str, LayerInputs] = OrderedDict()
_SPILLS_LOCK = threading.Lock()


@dataclass(frozen=True)
class Length:
    """How long the sidebar's text is for its model: `tokens` (up to `limit`, what the model can
    read at all) against `kept`, what a full trace keeps."""

    tokens: int
    limit: int
    kept: int

    @property
    def long(self) -> bool:
        return self.tokens > self.kept


def length(source: ModelSource, text: str, pair: str) -> Length | None:
    """The text's length when the model can read more than its full trace keeps and the text is
    longer than that; None otherwise (or when the model cannot load: the page says why)."""
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
    return Length(count, limit, runner.max_tokens) if count > runner.max_tokens else None


def read_setting() -> None:
    """The sidebar's one setting for long texts, drawn only when the text is longer than the
    model's full trace and the model can read more."""
    given = sidebar_input()
    found = length(given.source, given.text, given.pair)
    if found is None:
        return
    if st.session_state.pop(CANCELLED, False):
        st.caption("You left the line of long texts: the pages read the first part of yours.")
    st.toggle(
        f"Read all {found.tokens:,} tokens, layer by layer", key=READ_ALL,
        help=f"Off, the pages read the first {found.kept} tokens with every map kept. On, the "
             f"pages that explore a model read up to {found.limit:,} tokens: the model runs once, "
             "layer by layer, and each layer's maps are measured and pooled as soon as they "
             "exist, then let go; a head, a row or a window you pick is computed again, exactly, "
             "from its layer's input. About 90 s at 4,096 tokens on this machine, once per text "
             "for everyone on the server. The teaching pages, generation, ablation and the layer "
             "walk always read the first part.")


def reading_all(source: ModelSource, text: str, pair: str) -> bool:
    """Whether the sidebar asks for the whole of a long text (and this text is long)."""
    return bool(st.session_state.get(READ_ALL)) and length(source, text, pair) is not None


def current(token_options: bool = True) -> Attention | None:
    """The sidebar's input as an Attention, or None after saying why there is none. With
    `token_options`, a short input's maps are the sidebar's token view (merged words, hidden
    specials); a long input's are always per model token, and the page's caption says so."""
    given = sidebar_input()
    if not given.text.strip():
        st.info("Type a sentence in the sidebar to see its attention.")
        return None
    if not reading_all(given.source, given.text, given.pair):
        if current_trace() is None:  # it says why
            return None
    return of(given.source, given.text, given.pair, token_options)


def of(source: ModelSource, text: str, pair: str, token_options: bool = True) -> Attention | None:
    """Any input as an Attention (read whole when the sidebar's setting says so and it is long),
    or None after saying why there is none."""
    given = sidebar_input()
    try:
        runner = loaded_source(source)
        if reading_all(source, text, pair):
            return _streamed(runner, source, text, pair)
        trace = cache.trace(source, text, pair)
    except (ModelLoadError, ValueError) as error:
        st.error(plain(str(error)))
        return None
    record = trace.record
    if token_options and (given.merge_words or given.hide_special):
        view = cache.token_view(source, text, pair, given.merge_words, given.hide_special)
        for note in view.notes:
            st.caption(note)
        record = view.record
    encoded, _ = runner.encode(text, pair or None)
    return WholeAttention(runner, encoded, trace, record,
                          remember=_remembering(source, runner, text, pair,
                                                ("whole", record.tokens)))


def caption(attention: Attention) -> str:
    """What a page says under its controls: how many tokens it shows, of which model, how read."""
    if attention.whole:
        return f"{attention.num_tokens:,} tokens · {attention.label}"
    return f"all {attention.num_tokens:,} tokens, read layer by layer · {attention.label}"


def _remembering(source: ModelSource, runner: LoadedSource, text: str, pair: str, scope: tuple):
    """The access's `remember`: keyed by the input, kept in the byte-bounded trace store."""
    def remember(key, compute):
        return kept(stores.TRACES, result_key("attention", source, runner.label, text, pair,
                                              *scope, key), compute)
    return remember


@functools.cache
def _spill_root() -> Path:
    """The folder of this process's long inputs, made on the first long input (not at import)."""
    root = Path(tempfile.mkdtemp(prefix="attention-explorer-long-"))
    on_shutdown(shutil.rmtree, root, True)
    return root


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


def _forget(kept: LayerInputs) -> None:
    with _SPILLS_LOCK:
        _SPILLS.pop(kept.folder.name, None)
    kept.delete()


class WaitingLine:
    """Long forwards one at a time, server-wide, in the order sessions asked for them.

    The first place in the line runs; every other place knows how many are ahead of it. A place
    is left in a `finally`, whatever ends it: the work done, an error, or the session's run
    stopped while it waited (Cancel, a rerun or a closed tab make Streamlit raise in the waiting
    thread, at the next `st` call: the notice `waiting` shows each poll).
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._line: list[object] = []

    def join(self) -> object:
        """A new place at the end of the line (its ticket)."""
        ticket = object()
        with self._changed:
            self._line.append(ticket)
        return ticket

    def ahead(self, ticket: object) -> int:
        """How many places are ahead of `ticket` (0: its turn)."""
        with self._changed:
            return self._line.index(ticket)

    def wait(self, ticket: object, timeout: float) -> int:
        """Wait until the line moves or `timeout` seconds pass; how many are ahead now."""
        with self._changed:
            if self._line.index(ticket):
                self._changed.wait(timeout)
            return self._line.index(ticket)

    def leave(self, ticket: object) -> None:
        with self._changed:
            if ticket in self._line:
                self._line.remove(ticket)
            self._changed.notify_all()

    def __len__(self) -> int:
        with self._changed:
            return len(self._line)

    def run(self, work: Callable[[], Value], waiting: Callable[[int], None]) -> Value:
        """`work()` once every place ahead has left; meanwhile `waiting(places ahead)` at least
        every WAIT_POLL_S seconds (whatever it raises leaves the line)."""
        ticket = self.join()
        try:
            ahead = self.ahead(ticket)
            while ahead:
                waiting(ahead)
                ahead = self.wait(ticket, WAIT_POLL_S)
            return work()
        finally:
            self.leave(ticket)


_LINE = WaitingLine()


def place_text(ahead: int) -> str:
    """What a waiting session reads about its place in the line."""
    texts, they = ("text", "it finishes") if ahead == 1 else ("texts", "they finish")
    return (f"{ahead} long {texts} ahead of yours: this server reads one long text at a time, and "
            f"yours starts when {they}.")


def _cancel_reading() -> None:
    """Cancel's callback: read the first part of the text instead (before the next run)."""
    st.session_state[READ_ALL] = False
    st.session_state[CANCELLED] = True


def one_at_a_time(work: Callable[[], Value]) -> Value:
    """Run `work` when no other long forward is running on the server (WaitingLine), on every
    core (`one_forward_threads`: it is the line's only forward). While it waits, the session sees
    its place in the line and a Cancel button; its place is dropped when its run stops (Cancel,
    a rerun, a closed tab)."""
    notice = None
    place = None

    def waiting(ahead: int) -> None:
        nonlocal notice, place
        if notice is None:
            notice = st.empty()
            with notice.container():
                place = st.empty()
                st.button("Cancel", key=CANCEL_KEY, on_click=_cancel_reading,
                          help="Leave the line: the pages read the first part of the text.")
        place.info(place_text(ahead), icon=":material/hourglass_top:")

    def on_every_core() -> Value:
        with torch_threads(one_forward_threads()):  # the line's one forward (models/threads.py)
            return work()

    result = _LINE.run(on_every_core, waiting)
    if notice is not None:
        notice.empty()
    return result


@dataclass(frozen=True)
class _Read:
    """What one streamed forward keeps of a long input: its tokens and layer inputs (on disk)
    and its summary."""

    streamed: Streamed
    summary: SummaryResult

    @property
    def nbytes(self) -> int:
        ids = self.streamed.encoded.input_ids
        return self.summary.nbytes + ids.numel() * 80 + 4096  # ids, tokens and their strings


def _read(runner: LoadedSource, source: ModelSource, text: str, pair: str) -> _Read:
    """The long input read once per server, with a progress bar (see the module doc)."""
    key = result_key("long-read", source, runner.label, text, pair)

    def compute() -> _Read:
        bar = st.progress(0.0, text="Reading the long input layer by layer…")

        def progress(done: int, layers: int) -> None:
            bar.progress(min(done / layers, 1.0),
                         text=f"Reading the long input: layer {done} of {layers}…")

        folder = _spill_root() / uuid.uuid4().hex
        try:
            read = one_at_a_time(lambda: read_streamed(runner, text, pair or None, folder,
                                                       progress))
        finally:
            bar.empty()
            release_freed_memory()  # the layers' maps (~1.8 GB at 4,096 tokens) are gone now
        result = _Read(read.streamed, read.summary())
        _keep_on_disk(read.inputs)
        weakref.finalize(result, _forget, read.inputs)  # dropped from memory: its files go
        return result

    return kept(stores.TRACES, key, compute)


def _complete(read: _Read) -> bool:
    kept = read.streamed.layer_inputs
    return all(kept.has(layer) for layer in range(read.streamed.num_layers + 1))


def _streamed(runner: LoadedSource, source: ModelSource, text: str,
              pair: str) -> StreamedAttention:
    """The long input's access; when the disk budget has deleted its layers' inputs (other long
    inputs came after), one forward with a spinner writes them again."""
    read = _read(runner, source, text, pair)
    if not _complete(read):
        def refill() -> None:
            if _complete(read):  # another session wrote them while this one waited
                return
            with st.spinner("This text's layer inputs were cleared to make room for others; "
                            "reading it again, layer by layer…"):
                stream(runner, text, pair or None, lambda layer, maps: None,
                       keep_inputs=read.streamed.layer_inputs.folder)
            release_freed_memory()

        one_at_a_time(refill)
        _keep_on_disk(read.streamed.layer_inputs)
    return StreamedAttention(runner, read.streamed, read.summary,
                             remember=_remembering(source, runner, text, pair, ("long",)))
