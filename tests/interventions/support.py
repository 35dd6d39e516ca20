"""What the intervention tests share: each model's prompts, and the independent references (a
patched forward done one cell at a time through the hook engine's own edits, plain forwards)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from models.experiments import contrast
from models.hooks import points
from models.hooks.edits import replace_point
from models.hooks.text_run import run_text
from tests.interventions.conftest import (BERT_ANSWER, BERT_CLEAN, BERT_CORRUPTED, BERT_WRONG,
                                          GPT2_ANSWER, GPT2_CLEAN, GPT2_CORRUPTED, GPT2_WRONG,
                                          IOI_CLEAN, IOI_CORRUPTED)

PROMPTS = {
    "tiny_gpt2": (GPT2_CLEAN, GPT2_CORRUPTED, GPT2_ANSWER, GPT2_WRONG),
    "double_gpt2": (GPT2_CLEAN, GPT2_CORRUPTED, GPT2_ANSWER, GPT2_WRONG),
    "linear_gpt2": (GPT2_CLEAN, GPT2_CORRUPTED, GPT2_ANSWER, GPT2_WRONG),
    "tiny_bert": (BERT_CLEAN, BERT_CORRUPTED, BERT_ANSWER, BERT_WRONG),
    "decoder_runner": (IOI_CLEAN, IOI_CORRUPTED, "Mary", "John"),
}
CAPITAL = ("The capital of France is", "The capital of Italy is", "Paris", "Rome")


@dataclass(frozen=True)
class Experiment:
    loaded: object
    clean: str
    corrupted: str
    pair: contrast.PromptPair
    difference: contrast.LogitDifference


def experiment(request, name: str, prompts: tuple[str, str, str, str] | None = None
               ) -> Experiment:
    loaded = request.getfixturevalue(name)
    clean, corrupted, answer, wrong = prompts or PROMPTS[name]
    pair = contrast.prompt_pair(loaded, clean, corrupted)
    return Experiment(loaded, clean, corrupted, pair,
                      contrast.logit_difference(loaded, pair.clean, answer, wrong, pair.corrupted))


def metric_of(found: Experiment, logits: torch.Tensor) -> float:
    """logit[answer] - logit[wrong] at the read position, from (1, T, V) logits."""
    row = logits[0, found.difference.position].double()
    return float(row[found.difference.answer] - row[found.difference.wrong])


def clean_values(found: Experiment, names) -> dict[str, torch.Tensor]:
    return run_text(found.loaded, found.clean, cache=list(names)).cache


def patched_metric(found: Experiment, edits) -> float:
    """The corrupted prompt through the hook engine's run_text with `edits`."""
    return metric_of(found, run_text(found.loaded, found.corrupted, edits=edits).logits)


def one_cell(found: Experiment, site: str, layer: int, position: int | None,
             head: int | None) -> float:
    """One cell of a grid, patched by itself: the clean value put back with the engine's
    replace_point (positions, or a hook_z head), or by a hand-written edit of a head's pattern
    or values."""
    if site in ("resid_pre", "attn_out", "mlp_out"):
        name = points.Point("", layer, site).name
        clean = clean_values(found, [name])[name]
        return patched_metric(found, replace_point(name, clean, positions=[position]))
    if site in ("head", "head_position"):
        name = points.z(layer)
        clean = clean_values(found, [name])[name]
        return patched_metric(found, replace_point(
            name, clean, positions=None if position is None else [position], heads=[head]))
    if site == "head_pattern":
        name = points.pattern(layer)
        clean = clean_values(found, [name])[name]  # (1, H, Q, K)

        def pattern(value, _):
            value = value.clone()
            value[:, head] = clean[:, head].to(value.dtype)
            return value
        return patched_metric(found, {name: [pattern]})
    return _values_only(found, layer, head)


def _values_only(found: Experiment, layer: int, head: int) -> float:
    """The head with the clean values under its own pattern, in two plain steps: a corrupted run
    whose key/value head holding `head` reads the clean values gives that head's output, which
    alone is then put into a fresh corrupted run (other heads sharing the values unchanged)."""
    v_name, z_name = points.v(layer), points.z(layer)
    clean_v = clean_values(found, [v_name])[v_name]  # (1, Hkv, T, Dh)
    heads = run_text(found.loaded, found.corrupted, cache=[z_name]).cache[z_name].size(2)
    group = heads // clean_v.size(1)
    shared = head // group

    def values(value, _):
        value = value.clone()
        value[:, shared] = clean_v[:, shared].to(value.dtype)
        return value
    mixed = run_text(found.loaded, found.corrupted, cache=[z_name],
                     edits={v_name: [values]}).cache[z_name]
    return patched_metric(found, replace_point(z_name, mixed, heads=[head]))


SENTENCE_END = re.compile(r"[.!?](\s|$)")


def one_sentence(message: str) -> bool:
    """A message a user reads: one sentence, not starting in lower case (it may start with a
    model's name) and ending with a full stop (quoted text inside may hold other punctuation)."""
    unquoted = re.sub(r"'[^']*'|\([^)]*\)", "", message)
    return not message[:1].islower() and message.endswith(".") and \
        len(SENTENCE_END.findall(unquoted)) == 1
