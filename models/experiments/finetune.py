"""Seeded fine-tuning of a SequenceClassifier on CPU, with a progress callback.

The same seed, data and settings give the same model: the head is initialised from the seed,
the batches are shuffled by a seeded generator and dropout draws from a forked, seeded RNG.
Held-out loss and accuracy are measured before training (epoch 0) and after every epoch.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

from models.experiments.classifier import SequenceClassifier, predict, tokenize
from models.experiments.labelled_data import LabelledData
from models.limits import MAX_EPOCHS

PRETRAINED = "pretrained"
SCRATCH = "scratch"
ENCODER_KINDS = (PRETRAINED, SCRATCH)
WARMUP_SHARE = 0.1  # of all steps: the learning rate rises linearly, then falls linearly to 0
EVAL_BATCH = 64

Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class FinetuneSettings:
    """How to train. Defaults were chosen by bench/bench_finetune.py on the shipped data."""

    encoder: str = PRETRAINED
    epochs: int = 3
    batch_size: int = 16
    learning_rate: float = 1e-4
    weight_decay: float = 0.01
    max_tokens: int = 64
    pooling: str = "mean"
    seed: int = 0
    max_steps: int | None = None  # stop after this many optimiser steps (tests); None = all epochs
    # torch threads while training; None leaves torch's default. The app leaves it: measured
    # in bench/bench_finetune.py, torch.set_num_threads(1) made other sessions wait longer, not
    # less (it is process-wide: every thread started meanwhile, i.e. every other session's
    # rerun, also runs on one thread).
    threads: int | None = None

    def __post_init__(self) -> None:
        if self.encoder not in ENCODER_KINDS:
            raise ValueError(f"encoder must be one of {ENCODER_KINDS}, got {self.encoder!r}")
        if not 1 <= self.epochs <= MAX_EPOCHS:
            raise ValueError(f"epochs must be in [1, {MAX_EPOCHS}], got {self.epochs}")
        if self.batch_size < 1 or self.max_tokens < 2:
            raise ValueError("batch_size must be >= 1 and max_tokens >= 2")
        if not 0.0 < self.learning_rate < 1.0:
            raise ValueError(f"learning_rate must be in (0, 1), got {self.learning_rate}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")


# The pretrained encoder fine-tunes gently. The from-scratch one starts from noise: it gets a
# larger learning rate and SCRATCH_EPOCH_FACTOR times the epochs (it is about 5x faster per
# step), enough for its training loss to fall (chosen with bench/bench_finetune.py).
DEFAULT_EPOCHS = 3
PRETRAINED_LEARNING_RATE = 1e-4
SCRATCH_LEARNING_RATE = 2e-3
SCRATCH_EPOCH_FACTOR = 3


def default_settings(encoder: str, epochs: int = DEFAULT_EPOCHS, seed: int = 0) -> FinetuneSettings:
    """The app's settings for `encoder`; `epochs` is the pretrained encoder's count."""
    if encoder == PRETRAINED:
        return FinetuneSettings(encoder=encoder, epochs=epochs,
                                learning_rate=PRETRAINED_LEARNING_RATE, seed=seed)
    return FinetuneSettings(encoder=encoder, epochs=min(MAX_EPOCHS, SCRATCH_EPOCH_FACTOR * epochs),
                            learning_rate=SCRATCH_LEARNING_RATE, seed=seed)


@dataclass(frozen=True)
class EpochResult:
    epoch: int  # 0 = before training
    train_loss: float | None  # mean over the epoch's steps (None before training)
    held_out_loss: float
    held_out_accuracy: float
    seconds: float  # since the start of training


@dataclass(frozen=True)
class FinetuneResult:
    """A trained classifier (eval mode) and how it got there."""

    classifier: SequenceClassifier
    initial_head: nn.Linear  # the head before training, for "before" predictions
    epochs: tuple[EpochResult, ...]
    step_losses: tuple[float, ...]
    seconds: float
    settings: FinetuneSettings
    class_names: tuple[str, ...]
    data_fingerprint: str
    train_size: int
    held_out_size: int
    # class probabilities of the held-out sentences (N, C) before and after training
    held_out_before: np.ndarray | None = field(default=None, compare=False)
    held_out_after: np.ndarray | None = field(default=None, compare=False)

    @property
    def held_out_accuracy(self) -> float:
        return self.epochs[-1].held_out_accuracy

    @property
    def accuracy_before(self) -> float:
        return self.epochs[0].held_out_accuracy


def held_out_probabilities(classifier: SequenceClassifier, tokenizer, texts,
                           max_tokens: int) -> np.ndarray:
    """Class probabilities (N, C) of `texts`, batched as training measures them."""
    return predict(classifier, tokenizer, list(texts), max_tokens, EVAL_BATCH)  # (N, C)


def _measure(classifier: SequenceClassifier, tokenizer, texts, labels,
             max_tokens: int) -> tuple[float, float, np.ndarray]:
    probabilities = held_out_probabilities(classifier, tokenizer, texts, max_tokens)  # (N, C)
    target = np.asarray(labels)
    picked = probabilities[np.arange(len(target)), target]
    loss = float(-np.log(np.clip(picked, 1e-12, 1.0)).mean())
    accuracy = float((probabilities.argmax(axis=1) == target).mean())
    return loss, accuracy, probabilities


def evaluate(classifier: SequenceClassifier, tokenizer, texts, labels,
             max_tokens: int) -> tuple[float, float]:
    """(mean cross-entropy, accuracy) on `texts`, in eval mode."""
    loss, accuracy, _ = _measure(classifier, tokenizer, texts, labels, max_tokens)
    return loss, accuracy


def _schedule(total_steps: int) -> Callable[[int], float]:
    warmup = max(1, round(WARMUP_SHARE * total_steps))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))
    return factor


def finetune(classifier: SequenceClassifier, tokenizer, data: LabelledData,
             settings: FinetuneSettings, progress: Progress | None = None,
             max_steps: int | None = None) -> FinetuneResult:
    """Train `classifier` in place on the training part of `data`; measure the held-out part.

    `max_steps` (or `settings.max_steps`, the smaller of the two) stops early after that many
    optimiser steps (for tests). The classifier comes
    back in eval mode. `progress(fraction, message)` is called after every step.
    """
    if classifier.num_classes != data.num_classes:
        raise ValueError(f"the classifier has {classifier.num_classes} classes, the data "
                         f"{data.num_classes}")
    train_texts, train_labels = data.part(held_out=False)
    test_texts, test_labels = data.part(held_out=True)
    if not train_texts or not test_texts:
        raise ValueError("the data needs both training and held-out sentences")
    report = progress or (lambda fraction, message: None)
    initial_head = copy.deepcopy(classifier.head)
    steps_per_epoch = -(-len(train_texts) // settings.batch_size)
    total_steps = steps_per_epoch * settings.epochs
    for limit in (max_steps, settings.max_steps):
        if limit is not None:
            total_steps = min(total_steps, limit)
    previous_threads = torch.get_num_threads()
    if settings.threads is not None:
        torch.set_num_threads(settings.threads)
    start = time.perf_counter()
    try:
        classifier.eval()
        loss, accuracy, before = _measure(classifier, tokenizer, test_texts, test_labels,
                                          settings.max_tokens)
        after = before
        history = [EpochResult(0, None, loss, accuracy, time.perf_counter() - start)]
        report(0.0, f"Before training: held-out accuracy {accuracy:.0%}")
        decay = [p for n, p in classifier.named_parameters() if p.ndim > 1]
        no_decay = [p for n, p in classifier.named_parameters() if p.ndim <= 1]
        optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": settings.weight_decay},
             {"params": no_decay, "weight_decay": 0.0}], lr=settings.learning_rate)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _schedule(total_steps))
        step_losses: list[float] = []
        order_generator = torch.Generator().manual_seed(settings.seed)
        labels = torch.tensor(train_labels)
        step = 0
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(settings.seed)  # dropout
            for epoch in range(1, settings.epochs + 1):
                if step >= total_steps:
                    break
                classifier.train()
                order = torch.randperm(len(train_texts), generator=order_generator)
                epoch_losses = []
                for first in range(0, len(order), settings.batch_size):
                    if step >= total_steps:
                        break
                    chosen = order[first:first + settings.batch_size]
                    inputs = tokenize(tokenizer, [train_texts[i] for i in chosen],
                                      settings.max_tokens)
                    loss = F.cross_entropy(classifier(**inputs), labels[chosen])
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    optimizer.step()
                    scheduler.step()
                    step += 1
                    value = loss.item()
                    epoch_losses.append(value)
                    step_losses.append(value)
                    report(step / total_steps,
                           f"Epoch {epoch} of {settings.epochs}, step {step} of {total_steps}: "
                           f"loss {value:.3f}")
                classifier.eval()
                loss, accuracy, after = _measure(classifier, tokenizer, test_texts, test_labels,
                                                 settings.max_tokens)
                history.append(EpochResult(epoch, float(np.mean(epoch_losses)), loss, accuracy,
                                           time.perf_counter() - start))
        del optimizer, scheduler
    finally:
        classifier.eval()
        if settings.threads is not None:
            torch.set_num_threads(previous_threads)
    for parameter in classifier.parameters():
        parameter.grad = None
    return FinetuneResult(
        classifier=classifier, initial_head=initial_head, epochs=tuple(history),
        step_losses=tuple(step_losses), seconds=time.perf_counter() - start, settings=settings,
        class_names=data.class_names, data_fingerprint=data.fingerprint,
        train_size=len(train_texts), held_out_size=len(test_texts),
        held_out_before=before, held_out_after=after,
    )
