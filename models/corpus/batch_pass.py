"""One batch of a corpus job: its passages through the model as one padded batch, each layer's
maps handed to the app's reducers and let go.

`measure_batch` is the whole of a batch's work, and the only one: the in-process job calls it
batch after batch, and each Ray actor calls it on the batches it is given
(models.corpus.ray_engine). Each passage comes with the tokens the plan made (exactly as the app
tokenizes one input, `loaded.encode`, so it is tokenized once per job), padded on the right;
the forward is the app's streamed run (models.hooks.capture.run_streamed), so at most one
layer's (B, H, T, T) maps exist at a time.
Each layer goes to the Statistics and Detectors reducers of models/analysis (the numbers the app
shows for one input; both read one pass over the maps, models.analysis.layer_pass, as the app's
Summary does), to the head distances and to the embedding sampler.

Dimensions: B batch, L layers, H query heads, Hkv key/value heads, T tokens, Dh head width.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from models.analysis.detectors import SENTENCE_DETECTORS, Detectors, DetectorScores
from models.analysis.layer_pass import measure_batch as measure_rows
from models.analysis.statistics import HeadStatistics, Statistics
from models.analysis.token_batch import TokenBatch
from models.corpus.distances import DistanceSum, HeadDistances
from models.corpus.embedding import EmbeddingPoints, EmbeddingSampler
from models.corpus.plan import PlannedBatch, PlannedTokens
from models.corpus.sampling import Sampling
from models.hooks.capture import LayerCapture, num_layers, run_streamed
from models.loading.tokenize import EncodedText


@dataclass(frozen=True)
class BatchSetup:
    """What every batch of a job shares: the token limit and the sampling."""

    token_limit: int
    sampling: Sampling


@dataclass(frozen=True)
class BatchResult:
    """What one batch measured, passage by passage (in the batch's order)."""

    number: int
    block: int
    passages: np.ndarray  # (B,) int64
    tokens: np.ndarray  # (B,) int32
    statistics: HeadStatistics  # columns (B, L, H)
    detectors: DetectorScores  # scores (B, L, H)
    distances: DistanceSum
    points: EmbeddingPoints


def padded_inputs(loaded, encoded: list[EncodedText]) -> dict:
    """The model's inputs for the texts as one batch padded on the right with zeros (the
    attention mask keeps every padded key out of every real row)."""
    singles = [loaded.model_inputs(item) for item in encoded]
    width = max(len(item.tokens) for item in encoded)
    inputs = {}
    for name, value in singles[0].items():
        if not isinstance(value, torch.Tensor):
            inputs[name] = value
            continue
        padded = torch.zeros((len(singles), width), dtype=value.dtype)  # (B, T)
        for index, single in enumerate(singles):
            padded[index, :single[name].size(1)] = single[name][0]
        inputs[name] = padded
    return inputs


def encoded_text(loaded, planned: PlannedTokens) -> EncodedText:
    """A planned passage as `loaded.encode` gave it, rebuilt from its ids without the
    tokenizer's work (only the ids' token strings are looked up)."""
    ids = torch.tensor([planned.input_ids], dtype=torch.int64)  # (1, T)
    types = planned.type_ids
    return EncodedText(
        input_ids=ids, attention_mask=torch.ones_like(ids),
        token_type_ids=None if types is None else torch.tensor([types], dtype=torch.int64),
        tokens=tuple(loaded.tokenizer.convert_ids_to_tokens(list(planned.input_ids))),
        segment_ids=planned.segments, special_positions=planned.specials,
        dropped_tokens=planned.dropped)


def measure_batch(loaded, batch: PlannedBatch, setup: BatchSetup) -> BatchResult:
    """Run one planned batch and measure it (see the module doc)."""
    encoded = [encoded_text(loaded, planned) for planned in batch.tokens]
    tokens = TokenBatch.padded([TokenBatch.of_encoded(item, loaded.causal) for item in encoded])
    draws = [setup.sampling.draws(passage, len(item.tokens))
             for passage, item in zip(batch.passages, encoded)]
    statistics, detectors = Statistics(), Detectors(SENTENCE_DETECTORS)
    parts = statistics.parts | detectors.parts
    distances = HeadDistances(np.array([compared for compared, _ in draws]))
    layers = num_layers(loaded.model)
    sampler = EmbeddingSampler([positions for _, positions in draws], layers)

    kept: dict = {}  # what the pass reads besides the maps, made once for the batch

    def sink(layer: int, captured: LayerCapture) -> None:
        weights = captured.weights
        maps = (weights if weights.dtype == torch.float32 else weights.float()).numpy()
        maps.setflags(write=False)  # (B, H, T, T), valid during this call only
        rows = measure_rows(maps, tokens, parts, buffers=kept)  # one pass, both reducers
        for reducer in (statistics, detectors):
            reducer.take(layer, maps, tokens, rows)
        distances.add(layer, maps, tokens)
        sampler.add(layer, captured.query, captured.key)

    # The forward ends at the last layer's attention: its output projection and feed-forward
    # (an eighth of the forward on MiniLM) and the model's head feed nothing the job measures.
    run_streamed(loaded.model, padded_inputs(loaded, encoded), sink, stop_after=layers - 1)
    passages = np.asarray(batch.passages, dtype=np.int64)
    return BatchResult(
        number=batch.number, block=batch.block, passages=passages,
        tokens=tokens.lengths.astype(np.int32), statistics=statistics.result(),
        detectors=detectors.result(), distances=distances.result(),
        points=sampler.result(passages, [item.tokens for item in encoded]))
