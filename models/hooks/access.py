"""One attention access for any length: what every view reads of one input's attention.

A view asks for one head's map, some query rows of a layer (with the vectors they were computed
from), a window of every layer, the per-layer reductions (thumbnails, statistics, detectors,
roles, rollout: models/analysis), the predictions, or any point of a layer. Whether the input
was kept whole (a `Trace`: every map in memory) or streamed (each layer's maps reduced and let
go, each layer's input on disk, a layer's maps computed again from its input when asked) is this
module's business: `WholeAttention` and `StreamedAttention` answer the same questions with the
same numbers (the tests compare them), and a page never branches on which it holds.

Computations that are not cheap go through `remember(key, compute)`, which the caller provides
(the app's byte-bounded store; by default nothing is kept), so the same head of the same long
input is computed once for everyone.

Dimensions: L layers, H heads, T tokens, W rows or window positions, Q/K query/key positions.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pandas as pd

from models.analysis.compare import compare_heads, compare_role_tables, ranking_measure
from models.analysis.summary import SummaryStream
from models.hooks.access_base import Attention, Progress, per_layer_progress
from models.hooks.access_streamed import StreamedAttention
from models.hooks.access_whole import WholeAttention
from models.hooks.capture import num_layers
from models.hooks.streaming import prepare, stream

ROLE_MEASURE = ("Heads are ranked by the difference of their roles: the Jensen-Shannon divergence "
                "(in bits, 0 to 1) between how much weight each puts on the first token, other "
                "special tokens, itself, the previous token, the next token, and other earlier "
                "or later tokens (a position-by-position comparison needs both inputs' maps "
                "held whole).")


def compare(first: Attention, second: Attention) -> tuple[pd.DataFrame, str]:
    """Every head ranked by how differently it attends in two inputs, and one sentence saying
    how: position by position when both inputs' maps are held and have one length, else by the
    heads' roles (which the reductions of any input, however long, hold)."""
    if isinstance(first, WholeAttention) and isinstance(second, WholeAttention):
        return (compare_heads(first.record, second.record),
                ranking_measure(first.record, second.record))
    summaries = first.summary(), second.summary()
    labels = [summary.statistics["label"].reset_index(drop=True) for summary in summaries]
    return (compare_role_tables(summaries[0].roles, summaries[1].roles, *labels), ROLE_MEASURE)


def read_streamed(loaded, text: str, pair: str | None, folder: Path,
                  progress: Progress | None = None) -> StreamedAttention:
    """A long text read by one streamed forward: each layer's maps reduced by the Summary (with
    the value norms) as soon as they exist, each layer's input written to `folder`;
    `progress(done, layers)` is told after each layer. The folder is the caller's to delete
    (`attention.inputs.delete()`); it is removed if the forward fails."""
    encoded, _ = prepare(loaded, text, pair)
    layers = num_layers(loaded.model)
    reduce = SummaryStream(encoded, loaded.causal, per_layer_progress(progress, layers))
    try:
        streamed = stream(loaded, text, pair, reduce, keep_inputs=folder, with_norms=True)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return StreamedAttention(loaded, streamed, reduce.summary(streamed))


def read(loaded, text: str, pair: str | None = None, long: bool = True,
         folder: Path | None = None, progress: Progress | None = None) -> Attention:
    """`text` (and an optional second sentence) as an Attention. A text the model's full trace
    keeps (`loaded.max_tokens`) is run whole; a longer one, with `long` and a model that can
    read more (`long_limit`), is streamed layer by layer with each layer's input written to
    `folder` (a new temporary folder when None), else cut to the full trace's limit."""
    encoded, _ = prepare(loaded, text, pair)
    if long and len(encoded.tokens) > loaded.max_tokens:
        target = Path(folder) if folder is not None else Path(tempfile.mkdtemp(
            prefix="attention-explorer-inputs-"))
        return read_streamed(loaded, text, pair, target, progress)
    whole_encoded, _ = loaded.encode(text, pair)
    return WholeAttention(loaded, whole_encoded, loaded.run(text, pair))
