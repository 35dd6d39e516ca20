"""Train the from-scratch encoder–decoder on the toy translation task, translate with it, and
train once per server: `load_or_train` reads the disk copy (models/teaching/trained_translator.py) when
there is one.

Training is seeded and runs on the CPU. Along the way it records the cross-attention of one
fixed sentence (teacher-forced on its reference translation) at a few steps, so a learner can
watch the alignment form. Translation is greedy, one target word per step, and returns what
every attention did: the encoder's self-attention, the decoder's causal self-attention and the
cross-attention, each as an AttentionRecord.

Dimensions: B batch, S source tokens, T target tokens, L layers, H heads, V vocabulary.
"""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
import torch.nn.functional as F

from models.hooks.record import AttentionRecord
from models.scratch.seq2seq import Seq2SeqModel
from models.teaching.trained_translator import (SOURCE_LABEL, SUMMARY_FILE, Progress, Snapshot,
                                       TrainedTranslator, TrainingSettings, Translation,
                                       cache_folder, load, save, snapshot_pair,
                                       training_lock)
from models.teaching.translation_task import (BOS, BOS_ID, EOS_ID, MAX_TARGET_WORDS, PAD_ID, Pair,
                                     TranslationTask, check_source, make_task,
                                     reference_translations)

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
    fixed = snapshot_pair(task)
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


# --- training once per server ---------------------------------------------------------------

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
