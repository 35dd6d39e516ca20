"""The toy translator once trained: its settings, what training and translating it return, and
the copy on disk that lets a server train it once (models/teaching/seq2seq_training.py trains it).

The cache folder (under $ATTENTION_EXPLORER_CACHE or ~/.cache/attention-explorer) is named after
a hash of the training settings; it is written to a temporary folder and renamed into place only
when complete. A thread lock and a file lock (fcntl.flock) make concurrent sessions, threads or
server processes wait for one training instead of each running their own.

Dimensions: S source tokens, T target tokens, L layers, H heads.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from models.loading.conversion_cache import cache_root
from models.hooks.record import AttentionRecord
from models.scratch.seq2seq import Seq2SeqConfig, Seq2SeqModel
from models.store.folder_lock import folder_lock
from models.teaching.translation_task import (BOS, EOS, MAX_SOURCE_WORDS, MAX_TARGET_WORDS,
                                     SNAPSHOT_SENTENCE, Pair, TaskSettings, TranslationTask,
                                     Vocabulary, make_task, reference_translations)

CACHE_FORMAT = 1  # bump when the cached folder's layout changes
CACHE_PREFIX = "toy-translator"
WEIGHTS_FILE = "model.safetensors"
SNAPSHOTS_FILE = "snapshots.safetensors"
SUMMARY_FILE = "training.json"  # written last
SOURCE_LABEL = "toy translator (trained here)"

Progress = Callable[[int, int, float], None]  # (step, total steps, loss)


@dataclass(frozen=True)
class TrainingSettings:
    """Everything that decides the trained weights; the disk cache is keyed by all of it."""

    task: TaskSettings = field(default_factory=TaskSettings)
    seed: int = 0
    steps: int = 300
    batch_size: int = 64
    learning_rate: float = 2e-3
    warmup_steps: int = 50
    hidden_size: int = 64
    num_heads: int = 4
    num_layers: int = 2  # in the encoder and in the decoder
    intermediate_size: int = 128
    norm_style: str = "pre"
    snapshots: int = 6  # cross-attention pictures of the fixed sentence, first and last included
    evaluate_batch: int = 500
    # torch threads while training. A model this small trains fastest on one: measured on this
    # 2-core machine with other work running, 300 steps took 7-16 s on one thread and 31-189 s
    # on two (the two threads wait on each other; bench/bench_translation.py compares them).
    threads: int = 1

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "snapshots", "evaluate_batch", "threads"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"TrainingSettings.{name} must be a positive integer, got {value!r}")
        if self.snapshots < 2:
            raise ValueError("TrainingSettings.snapshots must be at least 2 (first and last step)")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate}")
        if not 0 <= self.warmup_steps < self.steps:
            raise ValueError(f"warmup_steps must be in [0, steps), got {self.warmup_steps}")
        self.model_config(1, 1)  # sizes are checked by the model's own config

    def model_config(self, source_vocab_size: int, target_vocab_size: int) -> Seq2SeqConfig:
        return Seq2SeqConfig(
            source_vocab_size=source_vocab_size, target_vocab_size=target_vocab_size,
            max_positions=max(MAX_SOURCE_WORDS, MAX_TARGET_WORDS) + 1,
            hidden_size=self.hidden_size, num_heads=self.num_heads,
            num_encoder_layers=self.num_layers, num_decoder_layers=self.num_layers,
            intermediate_size=self.intermediate_size, dropout=0.0, norm_style=self.norm_style,
        )

    def key(self) -> str:
        """A short hash naming these settings (and the cache format)."""
        text = json.dumps({"format": CACHE_FORMAT, **asdict(self)}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def snapshot_steps(self) -> tuple[int, ...]:
        """Steps after which the fixed sentence's cross-attention is recorded (0 = untrained)."""
        return tuple(sorted({int(round(s)) for s in np.linspace(0, self.steps, self.snapshots)}))


@dataclass(frozen=True)
class Snapshot:
    step: int
    loss: float | None  # the training loss at that step (None before the first step)
    cross: AttentionRecord  # (L, H, T, S) for the fixed sentence, teacher-forced


@dataclass(frozen=True)
class TrainedTranslator:
    model: Seq2SeqModel  # in eval mode
    task: TranslationTask
    settings: TrainingSettings
    losses: tuple[float, ...]  # one per step
    held_out_accuracy: float  # exact match, greedy, on sentences never seen in training
    snapshots: tuple[Snapshot, ...]
    seconds: float  # how long training took where it ran
    from_cache: bool = False

    @property
    def source_vocabulary(self) -> Vocabulary:
        return self.task.source_vocabulary

    @property
    def target_vocabulary(self) -> Vocabulary:
        return self.task.target_vocabulary


@dataclass(frozen=True)
class Translation:
    """A greedy translation and every attention that produced it.

    The decoder reads <bos> and the words it wrote so far; at step s (1-based) its query s - 1
    writes output_tokens[s - 1]. Rows of `decoder` and `cross` are those queries.
    """

    source_tokens: tuple[str, ...]
    output_tokens: tuple[str, ...]  # the words written, <eos> last when the model stopped
    encoder: AttentionRecord  # (L, H, S, S)
    decoder: AttentionRecord  # (L, H, T, T), causal
    cross: AttentionRecord  # (L, H, T, S): target queries x source keys
    reference: tuple[str, ...] | None  # the grammar's translation, when the sentence is in it

    @property
    def words(self) -> tuple[str, ...]:
        return tuple(t for t in self.output_tokens if t != EOS)

    @property
    def text(self) -> str:
        return " ".join(self.words)

    @property
    def finished(self) -> bool:
        return bool(self.output_tokens) and self.output_tokens[-1] == EOS

    @property
    def steps(self) -> int:
        return len(self.output_tokens)

    @property
    def correct(self) -> bool | None:
        return None if self.reference is None else self.words == self.reference


def snapshot_pair(task: TranslationTask) -> Pair:
    """The fixed sentence, with its translation, whose cross-attention the snapshots record."""
    source = tuple(SNAPSHOT_SENTENCE.split())
    return Pair(source, reference_translations()[source])


# --- the disk cache ----------------------------------------------------------------------------

_THREAD_LOCK = threading.Lock()


def cache_folder(settings: TrainingSettings, cache_dir: Path | None = None) -> Path:
    return cache_root(cache_dir) / f"{CACHE_PREFIX}-{settings.key()}"


def is_cached(settings: TrainingSettings, cache_dir: Path | None = None) -> bool:
    return (cache_folder(settings, cache_dir) / SUMMARY_FILE).is_file()


def training_lock(settings: TrainingSettings, cache_dir: Path | None = None):
    """Held while one thread of one process trains or reads these settings' cache."""
    return folder_lock(cache_folder(settings, cache_dir), _THREAD_LOCK)


def save(trained: TrainedTranslator, folder: Path) -> None:
    """Write weights, snapshots and a summary into a temporary folder, then rename it to `folder`."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}.partial-{os.getpid()}-",
                                    dir=folder.parent))
    try:
        save_file({k: v.contiguous() for k, v in trained.model.state_dict().items()},
                  str(partial / WEIGHTS_FILE), metadata={"format": "pt"})
        save_file({f"step_{s.step}": torch.tensor(s.cross.weights)
                   for s in trained.snapshots}, str(partial / SNAPSHOTS_FILE))
        fixed = snapshot_pair(trained.task)
        summary = {
            "format": CACHE_FORMAT,
            "settings": asdict(trained.settings),
            "source_vocabulary": list(trained.source_vocabulary.words),
            "target_vocabulary": list(trained.target_vocabulary.words),
            "losses": list(trained.losses),
            "held_out_accuracy": trained.held_out_accuracy,
            "snapshots": [{"step": s.step, "loss": s.loss} for s in trained.snapshots],
            "snapshot_tokens": list((BOS,) + fixed.target),
            "snapshot_key_tokens": list(fixed.source),
            "seconds": trained.seconds,
        }
        (partial / SUMMARY_FILE).write_text(json.dumps(summary, ensure_ascii=False, indent=1))
        shutil.rmtree(folder, ignore_errors=True)
        try:
            partial.rename(folder)
        except OSError:  # another process renamed its complete copy into place first
            if not (folder / SUMMARY_FILE).is_file():
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _settings_from(data: dict) -> TrainingSettings:
    return TrainingSettings(**{**data, "task": TaskSettings(**data["task"])})


def load(folder: Path) -> TrainedTranslator:
    """A cached training, read back; its vocabularies must be the task's own."""
    summary = json.loads((folder / SUMMARY_FILE).read_text())
    if summary["format"] != CACHE_FORMAT:
        raise ValueError(f"cache format {summary['format']} is not {CACHE_FORMAT}")
    settings = _settings_from(summary["settings"])
    task = make_task(settings.task)
    if (list(task.source_vocabulary.words) != summary["source_vocabulary"]
            or list(task.target_vocabulary.words) != summary["target_vocabulary"]):
        raise ValueError("the cached vocabularies are not the task's")
    model = Seq2SeqModel(settings.model_config(len(task.source_vocabulary),
                                               len(task.target_vocabulary)))
    model.load_state_dict(load_file(str(folder / WEIGHTS_FILE)))
    model.eval()
    arrays = load_file(str(folder / SNAPSHOTS_FILE))
    snapshots = tuple(
        Snapshot(entry["step"], entry["loss"], AttentionRecord(
            tokens=tuple(summary["snapshot_tokens"]), key_tokens=tuple(summary["snapshot_key_tokens"]),
            weights=arrays[f"step_{entry['step']}"].numpy(), source=SOURCE_LABEL))
        for entry in summary["snapshots"])
    return TrainedTranslator(model, task, settings, tuple(summary["losses"]),
                             float(summary["held_out_accuracy"]), snapshots,
                             float(summary["seconds"]), from_cache=True)
