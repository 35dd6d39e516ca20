"""Train the from-scratch encoder–decoder on the toy translation task, translate with it, and
keep the trained weights on disk so a server trains once.

Training is seeded and runs on the CPU. Along the way it records the cross-attention of one
fixed sentence (teacher-forced on its reference translation) at a few steps, so a learner can
watch the alignment form. Translation is greedy, one target word per step, and returns what
every attention did: the encoder's self-attention, the decoder's causal self-attention and the
cross-attention, each as an AttentionRecord.

The cache folder (under $ATTENTION_EXPLORER_CACHE or ~/.cache/attention-explorer) is named after
a hash of the training settings; it is written to a temporary folder and renamed into place only
when complete. A thread lock and a file lock (fcntl.flock) make concurrent sessions, threads or
server processes wait for one training instead of each running their own.

Dimensions: B batch, S source tokens, T target tokens, L layers, H heads, V vocabulary.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from models.conversion import cache_root
from models.record import AttentionRecord
from models.seq2seq import Seq2SeqConfig, Seq2SeqModel
from models.translation_task import (BOS, BOS_ID, EOS, EOS_ID, MAX_SOURCE_WORDS, MAX_TARGET_WORDS,
                                     PAD_ID, SNAPSHOT_SENTENCE, Pair, TaskSettings,
                                     TranslationTask, Vocabulary, check_source, make_task,
                                     reference_translations)

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


# --- batches -----------------------------------------------------------------------------------

def _batch(pairs: list[Pair], task: TranslationTask) -> tuple[torch.Tensor, ...]:
    """Padded ids: source (B, S), decoder input <bos> y (B, T), expected output y <eos> (B, T)."""
    sources = [task.source_vocabulary.ids(p.source) for p in pairs]
    targets = [task.target_vocabulary.ids(p.target) for p in pairs]
    source_length = max(map(len, sources))
    target_length = max(map(len, targets)) + 1
    source_ids = torch.full((len(pairs), source_length), PAD_ID)  # (B, S)
    decoder_input = torch.full((len(pairs), target_length), PAD_ID)  # (B, T)
    expected = torch.full((len(pairs), target_length), PAD_ID)  # (B, T)
    for row, (source, target) in enumerate(zip(sources, targets)):
        source_ids[row, :len(source)] = torch.tensor(source)
        decoder_input[row, :len(target) + 1] = torch.tensor([BOS_ID, *target])
        expected[row, :len(target) + 1] = torch.tensor([*target, EOS_ID])
    return source_ids, decoder_input, expected


def _learning_rate(settings: TrainingSettings, step: int) -> float:
    """Linear warm-up, then cosine decay to a tenth."""
    if step < settings.warmup_steps:
        return settings.learning_rate * (step + 1) / settings.warmup_steps
    progress = (step - settings.warmup_steps) / max(1, settings.steps - settings.warmup_steps)
    return settings.learning_rate * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def _epochs(count: int, generator: torch.Generator) -> Iterator[int]:
    while True:
        yield from torch.randperm(count, generator=generator).tolist()


# --- training ----------------------------------------------------------------------------------

def train(
    settings: TrainingSettings = TrainingSettings(),
    progress: Progress | None = None,
    on_snapshot: Callable[[Snapshot], None] | None = None,
) -> TrainedTranslator:
    """Train from a seed; `progress(step, total, loss)` after every step, `on_snapshot` at each
    snapshot step. Runs on `settings.threads` torch threads, then restores the count."""
    started = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(settings.threads)
    torch.set_flush_denormal(True)  # tiny gradients late in training would otherwise crawl
    try:
        return _train(settings, progress, on_snapshot, started)
    finally:
        torch.set_flush_denormal(False)  # torch's default
        torch.set_num_threads(threads)


def _train(settings: TrainingSettings, progress: Progress | None,
           on_snapshot: Callable[[Snapshot], None] | None, started: float) -> TrainedTranslator:
    task = make_task(settings.task)
    config = settings.model_config(len(task.source_vocabulary), len(task.target_vocabulary))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(settings.seed)
        model = Seq2SeqModel(config)
    generator = torch.Generator().manual_seed(settings.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate,
                                  betas=(0.9, 0.98), weight_decay=0.01)
    snapshot_steps = set(settings.snapshot_steps())
    fixed = _snapshot_pair(task)
    order = _epochs(len(task.train), generator)
    losses: list[float] = []
    snapshots: list[Snapshot] = []

    def snap(step: int) -> None:
        snapshot = Snapshot(step, losses[-1] if losses else None, _teacher_forced_cross(model, task, fixed))
        snapshots.append(snapshot)
        if on_snapshot is not None:
            on_snapshot(snapshot)

    if 0 in snapshot_steps:
        snap(0)
    for step in range(1, settings.steps + 1):
        model.train()
        for group in optimizer.param_groups:
            group["lr"] = _learning_rate(settings, step - 1)
        pairs = [task.train[next(order)] for _ in range(settings.batch_size)]
        source_ids, decoder_input, expected = _batch(pairs, task)
        output = model(source_ids, decoder_input, source_ids != PAD_ID, decoder_input != PAD_ID)
        loss = F.cross_entropy(output.logits.flatten(0, 1), expected.flatten(),
                               ignore_index=PAD_ID)  # (B*T, V) against (B*T,)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        if progress is not None:
            progress(step, settings.steps, losses[-1])
        if step in snapshot_steps:
            snap(step)
    model.eval()
    accuracy = held_out_accuracy(model, task, settings.evaluate_batch)
    return TrainedTranslator(model, task, settings, tuple(losses), accuracy, tuple(snapshots),
                             time.perf_counter() - started)


def _snapshot_pair(task: TranslationTask) -> Pair:
    source = tuple(SNAPSHOT_SENTENCE.split())
    return Pair(source, reference_translations()[source])


@torch.no_grad()
def _teacher_forced_cross(model: Seq2SeqModel, task: TranslationTask, pair: Pair) -> AttentionRecord:
    was_training = model.training
    model.eval()
    source_ids, decoder_input, _ = _batch([pair], task)
    output = model(source_ids, decoder_input)
    model.train(was_training)
    return AttentionRecord(
        tokens=(BOS,) + pair.target, key_tokens=pair.source, source=SOURCE_LABEL,
        weights=torch.stack(output.cross_attentions, dim=1)[0].numpy(),  # (L, H, T, S)
    )


@torch.no_grad()
def greedy_batch(model: Seq2SeqModel, source_ids: torch.Tensor, source_real: torch.Tensor,
                 max_words: int = MAX_TARGET_WORDS) -> torch.Tensor:
    """Greedy output ids (B, <= max_words + 1), padded with PAD_ID after each row's <eos>."""
    memory, _ = model.encode(source_ids, source_real)
    batch = source_ids.size(0)
    decoder_input = torch.full((batch, 1), BOS_ID)  # (B, 1)
    done = torch.zeros(batch, dtype=torch.bool)
    for _ in range(max_words + 1):
        logits = model.decode(decoder_input, memory, source_real).logits[:, -1]  # (B, V)
        logits[:, [PAD_ID, BOS_ID]] = torch.finfo(logits.dtype).min
        chosen = logits.argmax(-1).masked_fill(done, PAD_ID)  # (B,)
        decoder_input = torch.cat([decoder_input, chosen[:, None]], dim=1)  # (B, t + 1)
        done |= chosen == EOS_ID
        if done.all():
            break
    return decoder_input[:, 1:]


@torch.no_grad()
def held_out_accuracy(model: Seq2SeqModel, task: TranslationTask, batch_size: int = 500) -> float:
    """The share of held-out sentences whose greedy translation is exactly the reference."""
    model.eval()
    correct = 0
    for start in range(0, len(task.held_out), batch_size):
        pairs = list(task.held_out[start:start + batch_size])
        source_ids, _, expected = _batch(pairs, task)
        produced = greedy_batch(model, source_ids, source_ids != PAD_ID)
        for row, pair in enumerate(pairs):
            words = produced[row].tolist()
            wanted = task.target_vocabulary.ids(pair.target) + [EOS_ID]
            correct += words[:len(wanted)] == wanted
    return correct / len(task.held_out)


# --- translating one sentence ----------------------------------------------------------------

@torch.no_grad()
def translate(trained: TrainedTranslator, text: str,
              max_words: int = MAX_TARGET_WORDS) -> Translation:
    """Greedy translation, one word per step; ValueError (one sentence) for bad input."""
    model, task = trained.model, trained.task
    words = check_source(text, task.source_vocabulary)
    source_ids = torch.tensor([task.source_vocabulary.ids(words)])  # (1, S)
    memory, encoder_attentions = model.encode(source_ids)
    decoder_input = torch.tensor([[BOS_ID]])  # (1, 1)
    produced: list[int] = []
    while True:
        decoded = model.decode(decoder_input, memory)
        logits = decoded.logits[0, -1].clone()  # (V,)
        logits[[PAD_ID, BOS_ID]] = torch.finfo(logits.dtype).min
        produced.append(int(logits.argmax()))
        if produced[-1] == EOS_ID or len(produced) > max_words:
            break
        decoder_input = torch.cat([decoder_input, torch.tensor([[produced[-1]]])], dim=1)
    # The last pass read <bos> and every word but the last: its attentions cover every step.
    target_words = task.target_vocabulary.words
    output_tokens = tuple(target_words[i] for i in produced)
    query_tokens = tuple(target_words[i] for i in decoder_input[0].tolist())
    encoder = AttentionRecord(tokens=words, source=SOURCE_LABEL,
                              weights=torch.stack(encoder_attentions, 1)[0].numpy())  # (L, H, S, S)
    decoder = AttentionRecord(tokens=query_tokens, source=SOURCE_LABEL, masks=("causal",),
                              weights=torch.stack(decoded.decoder_attentions, 1)[0].numpy())
    cross = AttentionRecord(tokens=query_tokens, key_tokens=words, source=SOURCE_LABEL,
                            weights=torch.stack(decoded.cross_attentions, 1)[0].numpy())
    return Translation(words, output_tokens, encoder, decoder, cross,
                       reference_translations().get(words))


# --- the disk cache ----------------------------------------------------------------------------

_THREAD_LOCK = threading.Lock()


def cache_folder(settings: TrainingSettings, cache_dir: Path | None = None) -> Path:
    return cache_root(cache_dir) / f"{CACHE_PREFIX}-{settings.key()}"


def is_cached(settings: TrainingSettings, cache_dir: Path | None = None) -> bool:
    return (cache_folder(settings, cache_dir) / SUMMARY_FILE).is_file()


@contextmanager
def training_lock(settings: TrainingSettings, cache_dir: Path | None = None) -> Iterator[None]:
    """Held while one thread of one process trains or reads these settings' cache."""
    folder = cache_folder(settings, cache_dir)
    with _THREAD_LOCK:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with open(folder.parent / f".{folder.name}.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def load_or_train(
    settings: TrainingSettings = TrainingSettings(),
    progress: Progress | None = None,
    cache_dir: Path | None = None,
) -> TrainedTranslator:
    """The cached training for these settings, or a new one (then written to the cache).

    A cache that cannot be written (read-only disk, full disk) does not stop the training
    from being returned; the next caller then trains again.
    """
    folder = cache_folder(settings, cache_dir)
    with training_lock(settings, cache_dir):
        if (folder / SUMMARY_FILE).is_file():
            try:
                return load(folder)
            except (OSError, ValueError, KeyError, RuntimeError):
                shutil.rmtree(folder, ignore_errors=True)  # unreadable: train it again
        trained = train(settings, progress)
        try:
            save(trained, folder)
        except OSError:
            pass
        return trained


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
        fixed = _snapshot_pair(trained.task)
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
