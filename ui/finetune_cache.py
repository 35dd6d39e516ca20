"""Fine-tuned classifiers, trained once per server and shared by every session.

A model is keyed by a hash of the data and the settings (and the pretrained encoder's name).
Each trained model is also kept on disk (models/experiments/kept_classifier.py), so a later
server process reads it back instead of training again. Training (or reading it back) runs in a background thread, one training at a time on this server (two at once would
only share the same two cores); a session that asks for a model another session is already
training follows that same job's progress and then reuses its result. So pressing "train" twice,
or from thirty sessions at once, trains once, and a session that leaves the page does not stop a
training others are waiting for. At most `models.limits.FINETUNED_MODELS` trained models, and at
most `models.limits.FINETUNED_BYTES` of them (measured: parameters, buffers and the rest), are kept;
the least recently used go first, and the newest stays even alone over the budget (it is at most
one model the loader allowed, and a session is about to use it). A fine-tuned MiniLM copy is
about 90 MB, a from-scratch classifier about 20 MB. Before/after comparisons of a sentence are
kept in the byte-bounded store shared with the other pages (models.store.stores.RESULTS).
"""

from __future__ import annotations

import copy
import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

from models.experiments import kept_classifier
from models.experiments.classifier import Prediction, encoder_record, predict_one, with_head
from models.experiments.finetune import (DEFAULT_EPOCHS, PRETRAINED, FinetuneResult,
                                         FinetuneSettings, default_settings)
from models.experiments.labelled_data import LabelledData
from models.hooks.record import AttentionRecord
from models.loading.kinds.classifier import TrainingNames, description
from models.loading.pretrained import model_identity
from models.store import stores
from models.store.byte_cache import Store
from models.store.keys import result_key
from ui import cache
from ui.byte_caches import kept

POLL_SECONDS = 0.25  # how often a waiting page redraws the progress bar


class TrainingJob:
    """One training, run in its own thread; any number of sessions may wait on it."""

    def __init__(self, key: str, train: Callable[[Callable[[float, str], None]], FinetuneResult]):
        self.key = key
        self.fraction = 0.0
        self.message = "Waiting for another training on this server to finish…"
        self.result: FinetuneResult | None = None
        self.error: Exception | None = None
        self.done = threading.Event()
        self._train = train

    def report(self, fraction: float, message: str) -> None:
        self.fraction, self.message = fraction, message

    def run(self) -> None:
        try:
            self.result = self._train(self.report)
        except Exception as error:  # handed to every waiting session as one sentence
            self.error = error
        finally:
            self.done.set()

    @classmethod
    def finished(cls, key: str, result: FinetuneResult) -> TrainingJob:
        job = cls(key, lambda report: result)
        job.result, job.fraction = result, 1.0
        job.done.set()
        return job


class TrainedModels:
    """Trainings and their results: at most one training per key (any number of sessions wait
    on it), one training on this server at a time, and the results kept in `results` (a store
    bounded in number and in bytes that keeps the newest; models.store.stores.FINETUNED)."""

    def __init__(self, results: Store):
        self.results = results
        self.trainings = 0  # how many jobs ran: trainings, or reads from disk (tests read it)
        self._jobs: dict[str, TrainingJob] = {}
        self._lock = threading.Lock()  # guards _jobs and trainings
        self._one_at_a_time = threading.Lock()  # one training on this server at a time

    def get(self, key: str) -> FinetuneResult | None:
        return self.results.peek(key)

    def put(self, key: str, result: FinetuneResult) -> None:
        self.results.put(key, result)

    def recent(self) -> list[tuple[str, FinetuneResult]]:
        """(key, result) of every kept result, most recently used first (the order is kept)."""
        return list(reversed(self.results.items()))

    def job(self, key: str, train) -> TrainingJob:
        """The finished job, the one in flight for `key`, or a new one (started here)."""
        with self._lock:
            result = self.results.peek(key)
            if result is not None:
                return TrainingJob.finished(key, result)
            if key in self._jobs:
                return self._jobs[key]
            job = TrainingJob(key, train)
            self._jobs[key] = job
        threading.Thread(target=self._run, args=(job,), name=f"finetune-{key[:8]}",
                         daemon=True).start()
        return job

    def _run(self, job: TrainingJob) -> None:
        with self._one_at_a_time:
            with self._lock:
                self.trainings += 1
            job.run()
        if job.result is not None:
            self.put(job.key, job.result)
        with self._lock:
            self._jobs.pop(job.key, None)

    def result(self, key: str, train, on_progress: Callable[[float, str], None] | None = None
               ) -> FinetuneResult:
        """Train (or wait for the training of) `key`, reporting progress; raise its error."""
        job = self.job(key, train)
        while not job.done.wait(POLL_SECONDS):
            if on_progress is not None:
                on_progress(job.fraction, job.message)
        if job.error is not None:
            raise job.error
        return job.result


_TRAINED = TrainedModels(stores.FINETUNED)


def store() -> TrainedModels:
    """The one store of this server process."""
    return _TRAINED


def training_key(encoder_name: str, data: LabelledData, settings: FinetuneSettings) -> str:
    """The key of a training; it is also remembered with the encoder and data it names
    (models.store.stores.TRAINING_NAMES), so `finished` can list a sidebar encoder's results."""
    text = f"{encoder_name}|{data.fingerprint}|{settings!r}"
    key = hashlib.sha256(text.encode("utf-8")).hexdigest()
    stores.TRAINING_NAMES.put(key, TrainingNames(encoder_name, data.name))
    return key


@dataclass(frozen=True)
class Finished:
    """A classifier trained on this server, and what it was trained from."""

    key: str
    encoder_name: str
    data_name: str
    result: FinetuneResult

    @property
    def description(self) -> str:
        return description(TrainingNames(self.encoder_name, self.data_name), self.result)


def finished(encoder_name: str) -> list[Finished]:
    """The classifiers this server has trained from `encoder_name` (its copy, or the
    from-scratch encoder on its tokenizer), most recently used first; never trains."""
    listed = []
    for key, result in store().recent():
        names = stores.TRAINING_NAMES.peek(key)
        if names is not None and names.encoder_name == encoder_name:
            listed.append(Finished(key, names.encoder_name, names.data_name, result))
    return listed


def disk_key(encoder_name: str, data: LabelledData, settings: FinetuneSettings) -> str:
    """The key of the copy kept on disk (the encoder by what it is, however it is spelled)."""
    return kept_classifier.cache_key(model_identity(encoder_name), data, settings)


def cached(encoder_name: str, data: LabelledData, settings: FinetuneSettings
           ) -> FinetuneResult | None:
    """The trained result if this server has it, or reads it from disk (never trains)."""
    result = store().get(training_key(encoder_name, data, settings))
    if result is None and kept_classifier.is_kept(disk_key(encoder_name, data, settings)):
        try:
            with st.spinner("Reading the fine-tuned model kept on this machine…"):
                result = trained(encoder_name, data, settings)
        except kept_classifier.UNREADABLE:
            return None
    return result


def lesson_settings() -> FinetuneSettings:
    """What the lessons (and the fine-tuning page, by default) show: MiniLM, the default epochs."""
    return default_settings(PRETRAINED, DEFAULT_EPOCHS)


def _trainer(encoder_name: str, data: LabelledData, settings: FinetuneSettings):
    loaded = cache.pretrained(encoder_name)
    key = disk_key(encoder_name, data, settings)

    def train(report: Callable[[float, str], None]) -> FinetuneResult:
        # Its own tokenizer: a fast tokenizer shared with sessions encoding at the same moment
        # can fail ("Already borrowed"), and training calls it for every batch.
        tokenizer = copy.deepcopy(loaded.tokenizer)
        if kept_classifier.is_kept(key):
            report(0.0, "Reading the fine-tuned model kept on this machine…")
        return kept_classifier.load_or_train(loaded.model, tokenizer, data, settings, key,
                                             report).result
    return train


def trained(encoder_name: str, data: LabelledData, settings: FinetuneSettings,
            on_progress: Callable[[float, str], None] | None = None) -> FinetuneResult:
    """Train once per server (or wait for the training already running) and return the result."""
    return store().result(training_key(encoder_name, data, settings),
                          _trainer(encoder_name, data, settings), on_progress)


@dataclass(frozen=True)
class BeforeAfter:
    """One sentence through the pretrained encoder with its fresh head, and after fine-tuning."""

    before: Prediction
    after: Prediction
    before_record: AttentionRecord
    after_record: AttentionRecord


def before_after(key: str, encoder_name: str, text: str, _result: FinetuneResult) -> BeforeAfter:
    """`key` is the training key: `_result` (not part of the cache key) is the model it names."""
    def compute() -> BeforeAfter:
        loaded = cache.pretrained(encoder_name)
        limit = _result.settings.max_tokens
        untrained = with_head(_result.classifier, loaded.model, _result.initial_head)
        before_record = encoder_record(loaded.model, loaded.tokenizer, text, loaded.max_tokens,
                                       encoder_name)
        after_record = encoder_record(_result.classifier.encoder, loaded.tokenizer, text,
                                      loaded.max_tokens, f"{encoder_name}, fine-tuned")
        return BeforeAfter(
            before=predict_one(untrained, loaded.tokenizer, text, limit, _result.class_names),
            after=predict_one(_result.classifier, loaded.tokenizer, text, limit,
                              _result.class_names),
            before_record=before_record, after_record=after_record,
        )

    return kept(stores.RESULTS, result_key("before_after", key, encoder_name, text), compute,
                "Running the sentence…")
