"""Training a small span-masked encoder on a synthetic task, and the JSON file of its learned spans.

The task: a sequence of random symbols; at every position i the model must name two things,
the symbol at i - 1 (needs one step back) and the symbol at position 0 (needs up to T - 1 steps
back). A head that serves the first target can shrink its span to almost nothing; a head that
serves the second must keep a long one. The span penalty makes every head pay for its span, so
the heads that are not needed shrink too.

Dimension letters: B batch, T tokens, L layers, H heads, V vocabulary.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

from models.scratch.adaptive_span import SpanConfig, span_encoder, span_modules
from models.scratch.config import EncoderConfig

LEARNED_SPANS_PATH = Path(__file__).with_name("learned_spans.json")
FORMAT_VERSION = 1
TARGETS = ("previous", "first")  # the symbol at i - 1, the symbol at position 0
IGNORE = -100  # target value that cross-entropy skips (position 0 has no previous symbol)

Progress = Callable[[int, int, float], None]  # (step, total steps, loss so far)


@dataclass(frozen=True)
class SpanTrainingConfig:
    seq_len: int = 32
    vocab_size: int = 16
    hidden_size: int = 64
    num_heads: int = 4
    num_layers: int = 2
    intermediate_size: int = 128
    steps: int = 500
    batch_size: int = 32
    learning_rate: float = 3e-3
    span_learning_rate: float = 0.25  # z moves in tokens, so it gets its own, larger rate
    max_span: float = 32.0
    ramp: float = 4.0
    penalty: float = 0.02
    initial_span: float | None = None  # None = max_span: every head starts seeing everything
    causal: bool = True
    seed: int = 0
    log_every: int = 10

    def __post_init__(self) -> None:
        for name in ("seq_len", "vocab_size", "hidden_size", "num_heads", "num_layers",
                     "intermediate_size", "steps", "batch_size", "log_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"SpanTrainingConfig.{name} must be a positive integer, got {value!r}")
        if self.seq_len < 2 or self.vocab_size < 2:
            raise ValueError("the task needs at least 2 positions and 2 symbols")
        if self.learning_rate <= 0 or self.span_learning_rate <= 0:
            raise ValueError("learning rates must be > 0")
        # the spans themselves are checked by SpanConfig
        self.span_config()

    def encoder_config(self) -> EncoderConfig:
        return EncoderConfig(
            vocab_size=self.vocab_size, max_positions=self.seq_len, type_vocab_size=0,
            hidden_size=self.hidden_size, num_heads=self.num_heads, num_layers=self.num_layers,
            intermediate_size=self.intermediate_size, dropout=0.0, causal=self.causal,
        )

    def span_config(self) -> SpanConfig:
        return SpanConfig(num_heads=self.num_heads, max_span=self.max_span, ramp=self.ramp,
                          penalty=self.penalty, causal=self.causal,
                          initial_span=self.initial_span)


def synthetic_batch(
    generator: torch.Generator, batch_size: int, seq_len: int, vocab_size: int
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Random symbols (B, T) and, per target name, what each position must predict (B, T)."""
    symbols = torch.randint(0, vocab_size, (batch_size, seq_len), generator=generator)  # (B, T)
    previous = torch.full_like(symbols, IGNORE)
    previous[:, 1:] = symbols[:, :-1]
    first = symbols[:, :1].expand(-1, seq_len)  # (B, T)
    return symbols, {"previous": previous, "first": first}


class SpanTaskModel(nn.Module):
    """Span-masked encoder, a final LayerNorm, and one linear read-out per target."""

    def __init__(self, config: SpanTrainingConfig):
        super().__init__()
        self.encoder = span_encoder(config.encoder_config(), config.span_config())
        self.norm = nn.LayerNorm(config.hidden_size)
        self.readouts = nn.ModuleDict(
            {name: nn.Linear(config.hidden_size, config.vocab_size) for name in TARGETS}
        )

    def forward(self, symbols: torch.Tensor) -> dict[str, torch.Tensor]:
        """symbols (B, T) -> logits (B, T, V) per target."""
        hidden = self.norm(self.encoder(symbols).last_hidden_state)  # (B, T, D)
        return {name: readout(hidden) for name, readout in self.readouts.items()}

    def spans(self) -> torch.Tensor:
        return torch.stack([module.spans() for module in span_modules(self.encoder)])  # (L, H)

    def span_penalty(self) -> torch.Tensor:
        """Mean over layers of lambda * mean(z) = lambda * mean of every head's z."""
        return torch.stack([module.span_penalty() for module in span_modules(self.encoder)]).mean()


def task_loss(logits: dict[str, torch.Tensor], targets: dict[str, torch.Tensor]) -> torch.Tensor:
    return sum(F.cross_entropy(logits[name].flatten(0, 1), targets[name].flatten(), ignore_index=IGNORE)
               for name in TARGETS) / len(TARGETS)


def accuracy(logits: dict[str, torch.Tensor], targets: dict[str, torch.Tensor]) -> dict[str, float]:
    result = {}
    for name in TARGETS:
        valid = targets[name] != IGNORE
        hits = logits[name].argmax(dim=-1) == targets[name]
        result[name] = float(hits[valid].float().mean())
    return result


@contextmanager
def head_switched_off(model: SpanTaskModel, layer: int, head: int):
    """Remove one head's contribution: zero its columns of the layer's output projection."""
    attention = span_modules(model.encoder)[layer]
    columns = slice(head * attention.head_size, (head + 1) * attention.head_size)
    saved = attention.output.weight[:, columns].clone()
    with torch.no_grad():
        attention.output.weight[:, columns] = 0.0
    try:
        yield
    finally:
        with torch.no_grad():
            attention.output.weight[:, columns] = saved


@torch.no_grad()
def head_ablation(model: SpanTaskModel, symbols: torch.Tensor, targets: dict[str, torch.Tensor]
                  ) -> list[list[dict[str, float]]]:
    """Accuracy per target with each head switched off in turn, (L, H) of {target: accuracy}:
    the heads a target needs are the ones whose removal breaks it."""
    config = model.encoder.config
    table = []
    for layer in range(config.num_layers):
        row = []
        for head in range(config.num_heads):
            with head_switched_off(model, layer, head):
                row.append(accuracy(model(symbols), targets))
        table.append(row)
    return table


@dataclass(frozen=True)
class LearnedSpans:
    """What the page shows: z per layer and head after training, the loss curve, the settings."""

    spans: tuple[tuple[float, ...], ...]  # (L, H) tokens
    loss_steps: tuple[int, ...]
    losses: tuple[float, ...]  # task loss (without the penalty) at loss_steps
    accuracy: dict[str, float]  # per target, on a fresh batch after training
    ablation: tuple[tuple[dict[str, float], ...], ...]  # (L, H): accuracy with that head off
    seconds: float
    settings: SpanTrainingConfig

    def __post_init__(self) -> None:
        spans = np.asarray(self.spans, dtype=float)
        if spans.shape != (self.settings.num_layers, self.settings.num_heads):
            raise ValueError(f"spans of shape {spans.shape} for {self.settings.num_layers} layers x "
                             f"{self.settings.num_heads} heads")
        if spans.min() < 0 or spans.max() > self.settings.max_span:
            raise ValueError(f"spans must lie in [0, {self.settings.max_span}]")
        if [len(row) for row in self.ablation] != [self.settings.num_heads] * self.settings.num_layers:
            raise ValueError("the ablation table needs one entry per layer and head")
        if len(self.loss_steps) != len(self.losses) or not self.losses:
            raise ValueError("the loss curve needs one step number per loss value")

    @property
    def span_array(self) -> np.ndarray:
        return np.asarray(self.spans, dtype=float)

    def to_json(self) -> str:
        data = {"format": FORMAT_VERSION, "spans": [list(row) for row in self.spans],
                "loss_steps": list(self.loss_steps), "losses": list(self.losses),
                "accuracy": self.accuracy, "ablation": [list(row) for row in self.ablation],
                "seconds": self.seconds,
                "settings": asdict(self.settings)}
        lines = [f" {json.dumps(key)}: {json.dumps(value)}" for key, value in data.items()]
        return "{\n" + ",\n".join(lines) + "\n}\n"  # one line per field: small, readable diffs

    @classmethod
    def from_json(cls, text: str) -> "LearnedSpans":
        data = json.loads(text)
        if data.get("format") != FORMAT_VERSION:
            raise ValueError(f"learned spans file has format {data.get('format')!r}, "
                             f"expected {FORMAT_VERSION}")
        return cls(
            spans=tuple(tuple(float(z) for z in row) for row in data["spans"]),
            loss_steps=tuple(int(s) for s in data["loss_steps"]),
            losses=tuple(float(v) for v in data["losses"]),
            accuracy={str(k): float(v) for k, v in data["accuracy"].items()},
            ablation=tuple(tuple({str(k): float(v) for k, v in cell.items()} for cell in row)
                           for row in data["ablation"]),
            seconds=float(data["seconds"]),
            settings=SpanTrainingConfig(**data["settings"]),
        )


def load_learned_spans(path: Path = LEARNED_SPANS_PATH) -> LearnedSpans:
    return LearnedSpans.from_json(Path(path).read_text(encoding="utf-8"))


@contextmanager
def one_thread():
    """Run on one intra-op thread: these ops are tiny, and on a shared 2-core machine two threads
    were measured 3-4x slower (75 s against 20 s for the default run). Restores the setting."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def train_span_model(
    config: SpanTrainingConfig = SpanTrainingConfig(), progress: Progress | None = None
) -> tuple[SpanTaskModel, LearnedSpans]:
    """Train from a fixed seed; `progress(step, total, loss)` is called every `log_every` steps."""
    with one_thread():
        return _train(config, progress)


def _train(config: SpanTrainingConfig, progress: Progress | None) -> tuple[SpanTaskModel, LearnedSpans]:
    started = time.perf_counter()
    generator = torch.Generator().manual_seed(config.seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = SpanTaskModel(config)
    spans = [module.span for module in span_modules(model.encoder)]
    others = [p for p in model.parameters() if all(p is not s for s in spans)]
    optimiser = torch.optim.Adam([
        {"params": others, "lr": config.learning_rate},
        {"params": spans, "lr": config.span_learning_rate},
    ])
    # cosine decay to 0: z stops moving at the end instead of overshooting what the task needs
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda step: 0.5 * (1.0 + math.cos(math.pi * step / config.steps)))
    loss_steps, losses, running = [], [], []
    model.train()
    for step in range(1, config.steps + 1):
        symbols, targets = synthetic_batch(generator, config.batch_size, config.seq_len,
                                           config.vocab_size)
        loss = task_loss(model(symbols), targets)
        optimiser.zero_grad()
        (loss + model.span_penalty()).backward()
        optimiser.step()
        schedule.step()
        for module in span_modules(model.encoder):
            module.clamp_()
        running.append(loss.item())
        if step % config.log_every == 0 or step == config.steps:
            loss_steps.append(step)
            losses.append(round(float(np.mean(running)), 5))
            running = []
            if progress is not None:
                progress(step, config.steps, losses[-1])
    model.eval()
    with torch.no_grad():
        symbols, targets = synthetic_batch(generator, 256, config.seq_len, config.vocab_size)
        scores = accuracy(model(symbols), targets)
        ablation = head_ablation(model, symbols, targets)
        learned = model.spans().numpy()
    result = LearnedSpans(
        spans=tuple(tuple(round(float(z), 3) for z in row) for row in learned),
        loss_steps=tuple(loss_steps), losses=tuple(losses),
        accuracy={name: round(value, 4) for name, value in scores.items()},
        ablation=tuple(tuple({name: round(value, 4) for name, value in cell.items()} for cell in row)
                       for row in ablation),
        seconds=round(time.perf_counter() - started, 2), settings=config,
    )
    return model, result
