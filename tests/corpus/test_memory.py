"""A corpus job's memory does not grow with the corpus: a batch leaves nothing behind for Python's
cyclic collector (a reference cycle through the streamed forward once kept every batch's
reducers, tens of MB each, alive until the collector happened to run: the peak then grew with
the number of batches); and the head distances, computed a slice of heads at a time over the
upper triangle, equal the definition, zero weights (causal rows) included."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from models.corpus import distances as distance_module
from models.corpus.batch_pass import BatchSetup, measure_batch
from models.corpus.plan import make_plan, planned_batches
from models.corpus.reading import describe
from models.corpus.sampling import sampling_for
from tests.corpus.support import write_lines
from tests.corpus.test_job import js_distance


def test_a_measured_batch_leaves_no_reference_cycle(tmp_path, encoder_runner):
    plan = make_plan(encoder_runner, describe(write_lines(tmp_path)), tmp_path, batch_size=4)
    setup = BatchSetup(plan.token_limit, sampling_for(plan))
    batches = list(planned_batches(tmp_path))
    measure_batch(encoder_runner, batches[0], setup)  # first calls may cache things for good
    gc.collect()
    gc.disable()
    try:
        for batch in batches:
            result = measure_batch(encoder_runner, batch, setup)
            assert len(result.passages) == len(batch)
            del result
            assert gc.collect() == 0  # everything was freed by reference counting
    finally:
        gc.enable()


@pytest.mark.parametrize("chunk_bytes", [1, 5_000, 1 << 20])
def test_passage_distances_follow_the_definition(monkeypatch, chunk_bytes):
    monkeypatch.setattr(distance_module, "CORPUS_DISTANCE_CHUNK_BYTES", chunk_bytes)
    generator = np.random.default_rng(3)
    heads, rows, keys = 9, 3, 7
    weights = generator.random((heads, rows, keys)) ** 4
    weights[:, 0, 2:] = 0.0  # a causal first row: all its weight on the first keys
    weights[2] = weights[5]  # two heads that attend alike
    weights /= weights.sum(-1, keepdims=True)
    found = distance_module.passage_distances(weights.astype(np.float32))
    for a in range(heads):
        for b in range(heads):
            expected = np.mean([js_distance(weights[a, r], weights[b, r]) for r in range(rows)])
            assert found[a, b] == pytest.approx(expected, abs=1e-5), (a, b)
    assert found[2, 5] == 0.0 and np.array_equal(found, found.T)
