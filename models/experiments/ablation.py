"""Which heads matter for a prediction: head ablation, the single-head importance grid, knockout.

- Ablation removes a head's output: zero ablation replaces the head's per-token output (its
  weighted sum of values, before W_O) by 0, mean ablation by that output's mean over the input's
  positions. The change is read on one prediction: the log-probability of a target token.
- The importance grid (after Michel et al. 2019) ablates each head alone; B ablations share one
  batched forward (item b of the batch has its own head switched off). A head ablated in layer
  l leaves layers < l as the plain run computed them, so a batch starts at its first head's
  layer from that layer's input kept by the plain run (models.hooks.capture.run_from_layer):
  the grid runs about half the layers a forward per head would, and captures nothing.
- Knockout (Geva et al. 2023) removes attention edges from one query position to chosen key
  positions, before the softmax, in a window of layers.

The input and the target each reads its change on (a token and the position whose output
predicts it, or a fine-tuned classifier's class) are made in models/experiments/targets.py.

Dimensions: B batch, L layers, H heads, T tokens, Q/K positions, Dh head width, V vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from models.experiments import predictions
from models.hooks.capture import CapturedRun, Intervention, run_captured, run_from_layer
from models.hooks.install import HOOKED, install
from models.experiments.classifier import SequenceClassifier
from models.scratch.encoder import Encoder
from models.hooks.record import AttentionRecord
from models.hooks.trace import trace_from_run
from models.limits import GRID_BUDGET_BYTES
from models.experiments.targets import (NoPrediction, PreparedInput, Target, class_target,
                                        next_token_target, no_prediction_message)

ZERO, MEAN = "zero", "mean"
ABLATION_MODES = (ZERO, MEAN)
DEFAULT_BATCH = 32  # single-head ablations per forward in the importance grid, at most
FLOAT_BYTES = 4
TOP_K = 5

Progress = Callable[[int, int], None]  # (ablations done, ablations in all)


@dataclass(frozen=True)
class Outcome:
    """One forward: the attention it computed and what it predicted at the target's position."""

    record: AttentionRecord | None  # None when the caller did not ask to keep the maps
    target: Target
    probability: float  # of the target token
    log_probability: float
    candidates: tuple[predictions.Candidate, ...]  # the model's top tokens there


@dataclass(frozen=True)
class Comparison:
    before: Outcome
    after: Outcome

    @property
    def change(self) -> float:
        """after - before, in probability."""
        return self.after.probability - self.before.probability


def capturable(classifier: SequenceClassifier) -> SequenceClassifier:
    """The classifier, with its encoder's attention going through the app's capture.

    A copy of a loaded pretrained encoder keeps the capturing attention in its config; one that
    does not is switched here. The from-scratch encoder reports to the capture by itself."""
    if classifier.training:
        raise ValueError("The classifier must be in eval mode to be ablated.")
    if not getattr(classifier.encoder, HOOKED, False):
        install(classifier.encoder)
    return classifier


def _batched(prepared: PreparedInput, batch: int) -> dict[str, torch.Tensor]:
    return {name: value if value is None else value.expand(batch, *value.shape[1:])
            for name, value in prepared.inputs.items()}


def _forward_inputs(model: nn.Module, prepared: PreparedInput, batch: int) -> dict:
    inputs = _batched(prepared, batch)
    if prepared.causal and not isinstance(model, Encoder):
        inputs["logits_to_keep"] = 1  # only the last position predicts the target
    return inputs


def _target_log_probabilities(run: CapturedRun, target: Target, label: str) -> torch.Tensor:
    """(B,) the log-probability of the target token at its position, for each batch item."""
    return _log_probabilities_of(run.logits, target, label)


def _log_probabilities_of(logits: torch.Tensor | None, target: Target,
                          label: str) -> torch.Tensor:
    """(B,) the target token's log-probability in logits (B, T, V) (or (B, 1, V) when only the
    last position was kept)."""
    if logits is None:
        raise NoPrediction(no_prediction_message(label))
    row = logits[:, target.position] if logits.size(1) > 1 else logits[:, -1]  # (B, V)
    return torch.log_softmax(row.float(), dim=-1)[:, target.token_id]


def plain_run(model: nn.Module, prepared: PreparedInput,
              intervention: Intervention | None = None,
              keep_residual: bool = False) -> CapturedRun:
    """One captured forward of the input (with each layer's input kept, with `keep_residual`)."""
    if isinstance(model, SequenceClassifier):
        capturable(model)
    return run_captured(model, _forward_inputs(model, prepared, 1), intervention, keep_residual)


def _outcome(run: CapturedRun, prepared: PreparedInput, target: Target, tokenizer,
             keep_record: bool = True) -> Outcome:
    log_probability = float(_target_log_probabilities(run, target, prepared.source)[0])
    logits = run.logits[0]  # (T, V)
    row = logits[target.position] if logits.size(0) > 1 else logits[-1]  # (V,)
    top = predictions.top_candidates(torch.softmax(row.float(), dim=-1), tokenizer, TOP_K)
    record = (trace_from_run(run, prepared.encoded, prepared.source, prepared.causal).record
              if keep_record else None)
    return Outcome(record, target, math.exp(log_probability), log_probability, top)


def predict(model: nn.Module, prepared: PreparedInput, tokenizer,
            target: Target | None = None, keep_record: bool = True) -> Outcome:
    """The plain run's outcome; without a target, a causal LM's own most probable next token
    (a classifier's predicted class, `tokenizer` then being its ClassLabels) becomes the target."""
    run = plain_run(model, prepared)
    if run.logits is None:
        raise NoPrediction(no_prediction_message(prepared.source))
    if target is None and isinstance(model, SequenceClassifier):
        target = class_target(tokenizer, int(run.logits[0, -1].argmax()))
    elif target is None:
        if not prepared.causal:
            raise ValueError("A masked language model needs a masked word as its target.")
        best = int(run.logits[0, -1].argmax())
        target = next_token_target(prepared, tokenizer, best)
    return _outcome(run, prepared, target, tokenizer, keep_record)


def mean_head_outputs(run: CapturedRun) -> torch.Tensor:
    """(L, H, Dh): each head's output (before W_O) averaged over the input's positions."""
    return torch.stack([layer.context[0].mean(dim=0) for layer in run.layers])  # (L, H, Dh)


def head_shape(run: CapturedRun) -> tuple[int, int]:
    return len(run.layers), run.layers[0].weights.size(1)


def ablation_scale(layers: int, heads: int, ablated: Iterable[tuple[int, int]]) -> torch.Tensor:
    """(1, L, H): 1 keeps a head, 0 ablates it."""
    scale = torch.ones(1, layers, heads)
    for layer, head in ablated:
        if not (0 <= layer < layers and 0 <= head < heads):
            raise ValueError(f"Layer {layer}, head {head} is not in a model with {layers} layers "
                             f"of {heads} heads.")
        scale[0, layer, head] = 0.0
    return scale


def _replacement(mode: str, base: CapturedRun) -> torch.Tensor | None:
    if mode not in ABLATION_MODES:
        raise ValueError(f"Unknown ablation '{mode}': choose one of {', '.join(ABLATION_MODES)}.")
    return mean_head_outputs(base) if mode == MEAN else None


def ablate_heads(model: nn.Module, prepared: PreparedInput, tokenizer, target: Target,
                 heads: Sequence[tuple[int, int]], mode: str = ZERO) -> Comparison:
    """The prediction and attention with the chosen heads ablated, against the plain run."""
    if not heads:
        raise ValueError("Choose at least one head to ablate.")
    base = plain_run(model, prepared)
    layers, per_layer = head_shape(base)
    edit = Intervention(head_scale=ablation_scale(layers, per_layer, heads),
                        head_replacement=_replacement(mode, base))
    after = plain_run(model, prepared, edit)
    return Comparison(_outcome(base, prepared, target, tokenizer),
                      _outcome(after, prepared, target, tokenizer))


def grid_batch_size(base: CapturedRun, prepared: PreparedInput) -> int:
    """How many single-head ablations one forward can take within GRID_BUDGET_BYTES."""
    layers, heads = head_shape(base)
    tokens = prepared.num_tokens
    per_item = layers * heads * tokens * tokens * FLOAT_BYTES  # the captured weights
    if base.logits is not None:
        per_item += base.logits[0].numel() * FLOAT_BYTES  # (T, V), or (1, V) for a causal LM
    return max(1, min(DEFAULT_BATCH, GRID_BUDGET_BYTES // per_item))


def importance_grid(model: nn.Module, prepared: PreparedInput, target: Target,
                    mode: str = ZERO, batch_size: int | None = None,
                    progress: Progress | None = None) -> torch.Tensor:
    """(L, H): the target's log-probability with that head alone ablated, minus without.

    Negative = the head helps the prediction. `batch_size` single-head ablations run in one
    forward (default: `grid_batch_size`), heads in layer order; each batch starts at its first
    head's layer from that layer's input in the plain run (the layers below are unchanged);
    `progress(done, total)` is called after each.
    """
    if batch_size is not None and batch_size < 1:
        raise ValueError("The batch size must be at least 1.")
    base = plain_run(model, prepared, keep_residual=True)
    baseline = _target_log_probabilities(base, target, prepared.source)[0]
    layers, heads = head_shape(base)
    batch_size = batch_size or grid_batch_size(base, prepared)
    replacement = _replacement(mode, base)
    total = layers * heads
    changes = torch.empty(total)
    for start in range(0, total, batch_size):
        stop = min(start + batch_size, total)
        count = stop - start
        scale = torch.ones(count, layers * heads)
        scale[torch.arange(count), torch.arange(start, stop)] = 0.0  # item b ablates one
        edit = Intervention(head_scale=scale.view(-1, layers, heads),  # (B, L, H)
                            head_replacement=replacement)
        first = start // heads  # the batch's first head's layer
        entering = base.residual[first]  # (1, T, D)
        logits = run_from_layer(model, _forward_inputs(model, prepared, count), first,
                                entering.expand(count, *entering.shape[1:]).contiguous(), edit)
        changes[start:stop] = _log_probabilities_of(logits, target, prepared.source) - baseline
        if progress is not None:
            progress(stop, total)
    return changes.view(layers, heads)  # (L, H)


def knockout_edges(num_layers: int, num_tokens: int, query: int, keys: Iterable[int],
                   layers: Iterable[int]) -> torch.Tensor:
    """bool (L, Q, K): True on the edges from `query` to `keys` in the chosen layers."""
    keys = sorted(set(keys))
    layers = sorted(set(layers))
    if not keys:
        raise ValueError("Choose at least one key token to block.")
    if not layers:
        raise ValueError("Choose at least one layer to block the edges in.")
    if not 0 <= query < num_tokens or any(not 0 <= k < num_tokens for k in keys):
        raise ValueError(f"Positions must lie between 0 and {num_tokens - 1}.")
    if any(not 0 <= layer < num_layers for layer in layers):
        raise ValueError(f"Layers must lie between 0 and {num_layers - 1}.")
    blocked = torch.zeros(num_layers, num_tokens, num_tokens, dtype=torch.bool)
    blocked[torch.tensor(layers)[:, None], query, torch.tensor(keys)[None, :]] = True
    return blocked


def knockout(model: nn.Module, prepared: PreparedInput, tokenizer, target: Target, query: int,
             keys: Iterable[int], layers: Iterable[int], keep_records: bool = True) -> Comparison:
    """The prediction with the edges query -> keys removed in `layers`, against the plain run.

    A query row needs at least one edge left: blocking every key it may see raises ValueError.
    """
    base = plain_run(model, prepared)
    num_layers, _ = head_shape(base)
    blocked = knockout_edges(num_layers, prepared.num_tokens, query, keys, layers)
    visible = prepared.encoded.attention_mask[0].bool().clone()  # (K,)
    if prepared.causal:
        visible[query + 1:] = False
    if not (visible & ~blocked.any(dim=0)[query]).any():
        raise ValueError("Blocking every token the query can see leaves its attention nothing "
                         "to spread over: keep at least one key.")
    after = plain_run(model, prepared, Intervention(blocked=blocked))
    return Comparison(_outcome(base, prepared, target, tokenizer, keep_records),
                      _outcome(after, prepared, target, tokenizer, keep_records))
