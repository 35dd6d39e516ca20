"""Generation one token at a time with the key/value cache, keeping what each step attended to.

Step s reads the prompt and the s tokens generated so far and chooses one more. Without a cache
every step would run the whole sequence again; with it (Hugging Face's `DynamicCache`, passed as
`past_key_values`) step s >= 1 runs only the token chosen at step s - 1, whose keys and values
are appended to those of the earlier tokens. That one query's attention over every earlier token
is the row that chose the next token, so each step keeps it for every layer and head.

Each step is one run (models/hooks/run.py) that reads every layer's `hook_pattern` point and
keeps its last query row only, so the prompt's (H, P, P) maps are let go layer by layer.

Dimension letters: L layers, H (query) heads, P prompt tokens, t tokens read at a step, V
vocabulary.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from models.experiments.predictions import Candidate, candidate, top_candidates
from models.hooks import points
from models.hooks.capture import num_layers
from models.hooks.record import ROW_SUM_TOLERANCE
from models.hooks.run import Run, run_model
from models.limits import MAX_NEW_TOKENS
from models.loading.tokenize import encode

DEFAULT_NEW_TOKENS = 20
DEFAULT_TOP_K = 50
DEFAULT_CANDIDATES = 10  # candidates kept per step for the view

StepProgress = Callable[[int, int], None]  # (steps done, steps asked for)


class GenerationRefused(ValueError):
    """The request cannot be generated; the message is one sentence a user can act on."""


def no_step_progress(done: int, total: int) -> None:
    """The default progress callback: report nothing."""


@dataclass(frozen=True)
class GenerationSettings:
    """How to choose each token: greedy (the most probable) or sampled with a seed.

    Sampling divides the logits by `temperature`, keeps the `top_k` most probable tokens,
    renormalises and draws one with a generator seeded by `seed`.
    """

    new_tokens: int = DEFAULT_NEW_TOKENS
    greedy: bool = True
    temperature: float = 1.0
    top_k: int = DEFAULT_TOP_K
    seed: int = 0
    candidates: int = DEFAULT_CANDIDATES

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise GenerationRefused(f"The temperature must be above 0, not {self.temperature}.")
        if self.top_k < 1:
            raise GenerationRefused(f"Top-k must keep at least 1 token, not {self.top_k}.")
        if self.candidates < 1:
            raise GenerationRefused(f"Keep at least 1 candidate per step, not {self.candidates}.")

    @property
    def description(self) -> str:
        if self.greedy:
            return "greedy: always the most probable token"
        return (f"sampled at temperature {self.temperature:g} from the top {self.top_k} tokens, "
                f"seed {self.seed}")


@dataclass(frozen=True)
class GenerationStep:
    """One token generated, what it was chosen from, and the attention row that chose it.

    weights: float32 (L, H, t), the attention of the last token read (position t - 1) over all
    t tokens read so far, prompt first. Its output is what chose `token`.
    candidates: the most probable tokens of the distribution `token` was drawn from (the model's
    softmax when greedy; after temperature and top-k when sampling), most probable first.
    """

    index: int
    token: Candidate
    candidates: tuple[Candidate, ...]
    weights: np.ndarray

    def __post_init__(self) -> None:
        weights = np.asarray(self.weights, dtype=np.float32)
        if weights.ndim != 3 or weights.shape[-1] < 1:
            raise ValueError(f"a step's attention must be (layers, heads, tokens), got {weights.shape}")
        sums = weights.sum(axis=-1)  # (L, H)
        if not np.all(np.isfinite(sums)) or np.any(np.abs(sums - 1.0) > ROW_SUM_TOLERANCE):
            raise ValueError(f"step {self.index}: attention rows must be finite and sum to 1")
        weights.setflags(write=False)
        object.__setattr__(self, "weights", weights)

    @property
    def num_read(self) -> int:
        """t: how many tokens the step read (the prompt and the tokens generated before it)."""
        return self.weights.shape[-1]


@dataclass(frozen=True)
class Generation:
    """A prompt's tokens and every generated step. The prompt's own (P, P) attention is not kept:
    a session's result stays small (the prompt's map is the sidebar trace's, in the byte-bounded
    cache), while every step's row is."""

    prompt_tokens: tuple[str, ...]
    steps: tuple[GenerationStep, ...]
    settings: GenerationSettings
    stopped_at_end: bool  # the model chose its end-of-text token before N steps

    def __post_init__(self) -> None:
        if not self.steps:
            raise ValueError("a generation has at least one step")
        for step in self.steps:
            if step.num_read != len(self.prompt_tokens) + step.index:
                raise ValueError(f"step {step.index} read {step.num_read} tokens, expected "
                                 f"{len(self.prompt_tokens) + step.index}")

    @property
    def num_steps(self) -> int:
        return len(self.steps)

    @property
    def nbytes(self) -> int:
        """Memory held by the steps' attention rows."""
        return sum(step.weights.nbytes for step in self.steps)

    @property
    def num_layers(self) -> int:
        return self.steps[0].weights.shape[0]

    @property
    def num_heads(self) -> int:
        return self.steps[0].weights.shape[1]

    @property
    def generated_ids(self) -> tuple[int, ...]:
        return tuple(step.token.token_id for step in self.steps)

    @property
    def generated_text(self) -> str:
        return "".join(step.token.text for step in self.steps)

    @property
    def tokens(self) -> tuple[str, ...]:
        """Every token as the tokenizer writes it: the prompt's, then the generated ones."""
        return self.prompt_tokens + tuple(step.token.token for step in self.steps)

    def read_tokens(self, index: int) -> tuple[str, ...]:
        """The tokens step `index` read: the keys of its attention row."""
        return self.tokens[: self.steps[index].num_read]

    def first_token_weights(self) -> np.ndarray:
        """(S, L, H): at each step, the weight every head puts on the very first token."""
        return np.stack([step.weights[..., 0] for step in self.steps])  # (S, L, H)

    def row_entropy_bits(self) -> np.ndarray:
        """(S, L, H): how spread out each step's row is, in bits (0 = all on one token)."""
        entropies = []
        for step in self.steps:
            weights = step.weights.astype(np.float64)  # (L, H, t)
            logs = np.log2(weights, out=np.zeros_like(weights), where=weights > 0)
            entropies.append(-(weights * logs).sum(axis=-1))  # (L, H)
        return np.stack(entropies).astype(np.float32)  # (S, L, H)

    def sink_share(self) -> np.ndarray:
        """(L, H): the mean weight on the first token over the generated steps."""
        return self.first_token_weights().mean(axis=0)  # (L, H)

    def strongest_sink(self) -> tuple[int, int, float]:
        """(layer, head, share) of the head that puts the most weight on the first token."""
        shares = self.sink_share()  # (L, H)
        layer, head = np.unravel_index(int(shares.argmax()), shares.shape)
        return int(layer), int(head), float(shares[layer, head])

    def max_entropy_bits(self) -> float:
        """The largest possible row entropy at the last step: log2 of the tokens it read."""
        return float(np.log2(self.steps[-1].num_read))

    def even_share(self) -> float:
        """What the first token would get, on average over the steps, if rows were uniform."""
        return float(np.mean([1.0 / step.num_read for step in self.steps]))


def generate(model, tokenizer, prompt: str, settings: GenerationSettings, token_limit: int,
             source: str, progress: StepProgress | None = None,
             max_new_tokens: int = MAX_NEW_TOKENS) -> Generation:
    """Generate `settings.new_tokens` tokens after `prompt`, one at a time with the cache.

    `model` is a causal LM loaded with eager attention; `token_limit` is the most tokens (prompt
    plus generated) the app keeps for it; `source` names it in the prompt's record. Stops early
    when the model chooses its end-of-text token. Bad requests raise GenerationRefused with one
    sentence; `progress(done, total)` is called after every step.
    """
    report = progress or no_step_progress
    wanted = settings.new_tokens
    if not prompt or not prompt.strip():
        raise GenerationRefused("There is no prompt to continue: type some text first.")
    if wanted < 1:
        raise GenerationRefused(f"Ask for at least 1 new token, not {wanted}.")
    if wanted > max_new_tokens:
        raise GenerationRefused(f"At most {max_new_tokens} new tokens can be generated at once, "
                                f"not {wanted}.")
    encoded = encode(tokenizer, prompt, None, token_limit)
    prompt_length = encoded.input_ids.size(1) + encoded.dropped_tokens
    if prompt_length >= token_limit:
        raise GenerationRefused(
            f"The prompt already has {prompt_length} tokens and the app keeps at most "
            f"{token_limit} for this model, so there is no room for new tokens: shorten it."
        )
    if prompt_length + wanted > token_limit:
        raise GenerationRefused(
            f"The prompt has {prompt_length} tokens and the app keeps at most {token_limit} for "
            f"this model, so at most {token_limit - prompt_length} new tokens fit, not {wanted}."
        )
    generator = torch.Generator(device=model.device).manual_seed(int(settings.seed))
    end_ids = _end_token_ids(model, tokenizer)
    last_only = _last_logits_argument(model)
    steps = []
    layers = num_layers(model)
    output, step_weights = _step(model, dict(input_ids=encoded.input_ids.to(model.device),
                                              use_cache=True, **last_only), layers, source)
    for index in range(wanted):
        if index > 0:
            output, step_weights = _step(model, dict(input_ids=chosen_id.view(1, 1),
                                                     past_key_values=output.past_key_values,
                                                     use_cache=True, **last_only),
                                         layers, source)
        chosen_id, chosen, candidates = _choose(output.logits[0, -1], tokenizer, settings,
                                                generator)
        steps.append(GenerationStep(index=index, token=chosen, candidates=candidates,
                                    weights=step_weights))
        report(index + 1, wanted)
        if chosen.token_id in end_ids:
            break
    return Generation(prompt_tokens=encoded.tokens, steps=tuple(steps), settings=settings,
                      stopped_at_end=len(steps) < wanted)


def _choose(logits: torch.Tensor, tokenizer, settings: GenerationSettings,
            generator: torch.Generator) -> tuple[torch.Tensor, Candidate, tuple[Candidate, ...]]:
    """One (V,) logits row -> the chosen id, it as a Candidate, and the top candidates."""
    logits = logits.float()  # (V,)
    if settings.greedy:
        probabilities = torch.softmax(logits, dim=-1)  # (V,)
        chosen_id = probabilities.argmax()
        chosen = candidate(tokenizer, int(chosen_id), float(probabilities[chosen_id]))
        return chosen_id, chosen, top_candidates(probabilities, tokenizer, settings.candidates)
    kept_scores, kept_ids = (logits / settings.temperature).topk(min(settings.top_k, logits.numel()))
    probabilities = torch.softmax(kept_scores, dim=-1)  # (k,), most probable first
    pick = torch.multinomial(probabilities, 1, generator=generator)[0]
    chosen_id = kept_ids[pick]
    chosen = candidate(tokenizer, int(chosen_id), float(probabilities[pick]))
    shown = min(settings.candidates, kept_ids.numel())
    candidates = tuple(candidate(tokenizer, i, p) for i, p in
                       zip(kept_ids[:shown].tolist(), probabilities[:shown].tolist()))
    return chosen_id, chosen, candidates


def _step(model, inputs: dict, layers: int, source: str):
    """One forward of a generation step: the model's output (its logits and key/value cache)
    and the last query row of every layer's attention, float32 (L, H, t)."""
    rows: dict[int, torch.Tensor] = {}

    def keep_last_row(weights: torch.Tensor, name: str) -> None:  # (1, H, Q, t)
        rows[points.parse(name).layer] = weights[0, :, -1, :].float().clone()  # (H, t)

    run = Run(edits={name: keep_last_row for name in points.every_layer("pattern", layers)})
    output = run_model(model, inputs, run)
    if len(rows) != layers:
        raise GenerationRefused(
            f"'{source}' returned no attention weights (it must run with eager attention)."
        )
    return output, torch.stack([rows[layer] for layer in range(layers)]).numpy()  # (L, H, t)


def _end_token_ids(model, tokenizer) -> frozenset[int]:
    """The ids that end a text: the generation config's end-of-sequence ids, else the tokenizer's."""
    configured = getattr(model.generation_config, "eos_token_id", None)
    if configured is None:
        configured = tokenizer.eos_token_id
    if configured is None:
        return frozenset()
    return frozenset([configured] if isinstance(configured, int) else configured)


def _last_logits_argument(model) -> dict[str, int]:
    """Ask for the last position's logits only, when the model can (saves a (P, V) product)."""
    if "logits_to_keep" in inspect.signature(model.forward).parameters:
        return {"logits_to_keep": 1}
    return {}
