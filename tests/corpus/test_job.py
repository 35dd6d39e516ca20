"""The corpus job: its batched pass gives, passage by passage, what the app's single-input path
gives; heads.parquet's means and spreads equal a computation from each passage's own record by
the definitions; head distances and the query-key sample follow their definitions; an
interrupted job resumes to the same files."""

from __future__ import annotations

import json
import math
import threading

import numpy as np
import pandas as pd
import pytest

from models.analysis.detectors import NotMeasurable
from models.analysis.summary import summarise_record
from models.corpus import plan as planning
from models.corpus.columns import DETECTORS, STATISTICS
from models.corpus.distances import spaced_rows
from models.corpus.job import JobSettings, run_corpus
from models.corpus.layout import aligned
from models.corpus.result import CorpusResult
from models.hooks.capture import run_captured
from tests.corpus.support import PASSAGES, numeric, tables, write_lines

ATOL = 1e-5


@pytest.fixture(scope="module")
def encoder_job(tmp_path_factory, encoder_runner):
    folder = tmp_path_factory.mktemp("encoder")
    out = folder / "out"
    run_corpus(write_lines(folder), out, loaded=encoder_runner, settings=JobSettings(batch_size=5))
    return CorpusResult.open(out)


@pytest.fixture(scope="module")
def decoder_job(tmp_path_factory, decoder_runner):
    folder = tmp_path_factory.mktemp("decoder")
    out = folder / "out"
    run_corpus(write_lines(folder, PASSAGES[:6]), out, loaded=decoder_runner,
               settings=JobSettings(batch_size=4))
    return CorpusResult.open(out)


def alone(runner, text):
    """The app's single-input path: one forward, the Summary of its record."""
    return summarise_record(runner.run(text).record)


@pytest.mark.parametrize("job, runner, count", [("encoder_job", "encoder_runner", 12),
                                               ("decoder_job", "decoder_runner", 6)])
def test_each_passage_measures_as_it_does_alone(request, job, runner, count):
    result, runner = request.getfixturevalue(job), request.getfixturevalue(runner)
    rows = pd.read_parquet(result.folder / "passages.parquet")
    assert len(rows) == count * result.shape.num_heads
    assert sorted(set(rows["passage"])) == list(range(count))
    for passage, text in enumerate(PASSAGES[:count]):
        mine = rows[rows["passage"] == passage].sort_values(["layer", "head"])
        summary = alone(runner, text)
        table = summary.statistics
        assert mine["tokens"].iloc[0] == len(runner.encode(text)[0].tokens)
        for column, source in STATISTICS.items():
            np.testing.assert_allclose(mine[column].to_numpy(), table[source].to_numpy(),
                                       rtol=0, atol=ATOL, err_msg=f"{text}: {column}")
        for column, source in DETECTORS.items():
            try:
                expected = summary.detector_scores(source).ravel()
            except NotMeasurable:
                assert mine[column].isna().all()
                continue
            np.testing.assert_allclose(mine[column].to_numpy(), expected, rtol=0, atol=ATOL)


def entropy_bits(weights: np.ndarray) -> float:
    """One head's map (Q, K) by the definition: per query row, -sum p log2 p over its keys; the
    mean over rows."""
    rows = []
    for row in weights.astype(np.float64):
        rows.append(-sum(p * math.log2(p) for p in row if p > 0))
    return sum(rows) / len(rows)


def test_heads_means_and_spreads_follow_their_definitions(encoder_job, encoder_runner):
    records = [encoder_runner.run(text).record for text in PASSAGES]
    heads = encoder_job.heads.sort_values(["layer", "head"])
    layers, count = encoder_job.shape.layers, encoder_job.shape.heads
    entropy = np.array([[[entropy_bits(r.weights[l, h]) for h in range(count)]
                         for l in range(layers)] for r in records])  # (N, L, H)
    previous = np.array([[[np.diagonal(r.weights[l, h], offset=-1).astype(np.float64).mean()
                           for h in range(count)] for l in range(layers)] for r in records])
    first = np.array([r.weights[..., 0].astype(np.float64).mean(axis=-1) for r in records])
    for name, values in (("entropy", entropy), ("previous", previous), ("first", first)):
        np.testing.assert_allclose(heads[f"{name}_mean"], values.mean(axis=0).ravel(), rtol=0,
                                   atol=ATOL)
        np.testing.assert_allclose(heads[f"{name}_std"], values.std(axis=0, ddof=1).ravel(),
                                   rtol=0, atol=ATOL)
        assert (heads[f"{name}_passages"] == len(PASSAGES)).all()
    summary = json.loads((encoder_job.folder / "corpus.json").read_text())
    assert summary["corpus"]["passages"] == len(PASSAGES) and summary["format"] == 1
    assert summary["model"]["layers"] == 6 and summary["app_version"]


def js_distance(p: np.ndarray, q: np.ndarray) -> float:
    """sqrt of the Jensen-Shannon divergence in bits, one row pair, by the definition."""
    def entropy(row):
        return -sum(x * math.log2(x) for x in row if x > 0)
    mixed = [(a + b) / 2 for a, b in zip(p, q)]
    return math.sqrt(max(entropy(mixed) - (entropy(p) + entropy(q)) / 2, 0.0))


def test_head_distances_are_mean_jensen_shannon_distances(encoder_job, encoder_runner):
    distances = encoder_job.distances()
    heads = encoder_job.shape.heads
    assert encoder_job.summary["distance_passages"] == len(PASSAGES)  # few: all compared
    assert np.allclose(distances, distances.T) and np.allclose(np.diag(distances), 0)
    records = [encoder_runner.run(text).record.weights.astype(np.float64) for text in PASSAGES]
    for a, b in ((0, 1), (3, 70), (20, 45)):
        per_passage = []
        for weights in records:
            rows = spaced_rows(weights.shape[2])
            first, second = weights[a // heads, a % heads], weights[b // heads, b % heads]
            per_passage.append(np.mean([js_distance(first[r], second[r]) for r in rows]))
        assert distances[a, b] == pytest.approx(np.mean(per_passage), abs=ATOL)


def test_the_sample_holds_each_tokens_own_query_and_key(encoder_job, encoder_runner):
    layer, head = 2, 5
    points = encoder_job.head_points(layer, head)
    assert len(points.token) == encoder_job.summary["embedded_tokens"] > 0
    for index in np.linspace(0, len(points.token) - 1, 6).astype(int):
        text = PASSAGES[points.passage[index]]
        encoded, inputs = encoder_runner.encode(text)
        captured = run_captured(encoder_runner.model, inputs).layers[layer]
        position = points.position[index]
        assert points.token[index] == encoded.tokens[position]
        np.testing.assert_allclose(points.queries[index], captured.query[0, head, position],
                                   rtol=1e-2, atol=1e-2)  # kept as float16
        np.testing.assert_allclose(points.keys[index], captured.key[0, head, position],
                                   rtol=1e-2, atol=1e-2)


def test_aligning_queries_and_keys_leaves_the_attention_unchanged():
    rng = np.random.default_rng(0)
    queries, keys = rng.normal(size=(7, 4)), rng.normal(2.0, 3.0, size=(7, 4))
    moved_queries, moved_keys = aligned(queries, keys)

    def softmax(scores):
        scores = scores - scores.max(axis=1, keepdims=True)
        return np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)

    np.testing.assert_allclose(softmax(moved_queries @ moved_keys.T), softmax(queries @ keys.T),
                               atol=1e-12)
    key_mean, query_mean = moved_keys.mean(axis=0), moved_queries.mean(axis=0)
    assert np.allclose(key_mean / np.linalg.norm(key_mean),
                       query_mean / np.linalg.norm(query_mean))  # one centre, then scaled
    assert np.isclose(np.linalg.norm(moved_queries, axis=1).mean(),
                      np.linalg.norm(moved_keys, axis=1).mean())


class Interrupted(Exception):
    """Stands in for a job killed part-way."""


def test_an_interrupted_job_resumes_to_the_same_files(tmp_path, encoder_runner, monkeypatch):
    monkeypatch.setattr(planning, "BLOCK_PASSAGES", 4)  # several blocks from a small corpus
    corpus = write_lines(tmp_path)
    settings = JobSettings(batch_size=2)
    whole = tmp_path / "whole"
    run_corpus(corpus, whole, loaded=encoder_runner, settings=settings)
    resumed = tmp_path / "resumed"
    seen = []

    def stop_after_five(state):
        seen.append(state.done)
        if state.done >= 5:
            raise Interrupted()

    with pytest.raises(Interrupted):
        run_corpus(corpus, resumed, loaded=encoder_runner, settings=settings,
                   progress=stop_after_five)
    assert not (resumed / "corpus.json").exists() and not (resumed / "heads.parquet").exists()
    complete = [p.name for p in (resumed / ".work" / "blocks").iterdir()
                if not p.name.endswith(".partial")]  # the interrupted block stays partial
    assert complete == ["000000"]
    after = []
    run_corpus(corpus, resumed, loaded=encoder_runner, settings=settings,
               progress=lambda state: after.append(state.done))
    assert after[0] > 4 and after[-1] == len(PASSAGES)  # the first block was not run again
    for name, frame in tables(whole).items():
        pd.testing.assert_frame_equal(frame, tables(resumed)[name], check_exact=True)
    for name in ("head_distances.npy", "embedding/queries.npy", "embedding/keys.npy"):
        assert np.array_equal(np.load(whole / name), np.load(resumed / name))
    assert not (resumed / ".work").exists()
    with pytest.raises(ValueError, match="another corpus, model or settings"):
        run_corpus(corpus, resumed, loaded=encoder_runner, settings=JobSettings(batch_size=3))
    again = run_corpus(corpus, resumed, loaded=encoder_runner, settings=settings)
    assert again == json.loads((resumed / "corpus.json").read_text())  # finished: read back
    assert numeric(tables(resumed)["heads"]).shape[0] == 72


def test_a_sample_that_cannot_be_written_stops_the_job(tmp_path, encoder_runner, monkeypatch):
    """The embedding sample is written by a writer thread while the next batch is measured; a
    write that fails there stops the job with its own error, and no block looks complete."""
    from models.corpus import blocks

    corpus = write_lines(tmp_path)
    appended = []

    def full_disk(self, part):
        appended.append(threading.current_thread().name)
        if len(appended) == 3:  # the second batch's queries
            raise OSError(28, "No space left on device")
        return original(self, part)

    original = blocks.GrowingArray.append
    monkeypatch.setattr(blocks.GrowingArray, "append", full_disk)
    done = []
    with pytest.raises(OSError, match="No space left"):
        run_corpus(corpus, tmp_path / "out", loaded=encoder_runner,
                   settings=JobSettings(batch_size=2), progress=lambda s: done.append(s.done))
    assert done and done[-1] < len(PASSAGES)  # stopped part-way, not at the end
    work = tmp_path / "out" / ".work"
    assert not (tmp_path / "out" / "corpus.json").exists()
    assert [p.name for p in (work / "blocks").iterdir()] == ["000000.partial"]
    assert all(name.startswith("corpus-writer") for name in appended)  # not the job's thread
    assert not [thread for thread in threading.enumerate()
                if thread.name.startswith("corpus-writer")]  # the writer thread is stopped


def test_a_job_failing_while_a_sample_is_written_reports_its_own_error(tmp_path, encoder_runner,
                                                                        monkeypatch):
    """The first batch's sample fails to be written while the second batch fails to be measured:
    the job reports the measuring's error (the one that stopped it), not the write's."""
    from models.corpus import blocks
    from models.corpus import job as jobs

    def full_disk(self, part):
        raise OSError(28, "No space left on device")

    measured = []
    original = jobs.measure_batch

    def second_fails(loaded, batch, setup):
        measured.append(batch.number)
        if len(measured) == 2:
            raise Interrupted()
        return original(loaded, batch, setup)

    monkeypatch.setattr(blocks.GrowingArray, "append", full_disk)
    monkeypatch.setattr(jobs, "measure_batch", second_fails)
    with pytest.raises(Interrupted):
        run_corpus(write_lines(tmp_path), tmp_path / "out", loaded=encoder_runner,
                   settings=JobSettings(batch_size=2))
    assert len(measured) == 2
    assert not [thread for thread in threading.enumerate()
                if thread.name.startswith("corpus-writer")]
