"""The masked LM pretrained here: BERT's recipe (15% chosen; 80/10/10), a loss that counts the
chosen positions only, seeded training kept on disk, and its [MASK] fillers and attention read
through the same trace as any model's."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from models.experiments import masked_lm
from models.experiments.masked_lm import (IGNORED, MaskingRecipe, PretrainingSettings, mask_tokens,
                                          masked_lm_loss)
from models.loading import kinds
from models.loading.kinds import MASKED_LM
from models.loading.kinds.masked_lm import masked_lm_runner
from models.loading.pretrained import DEFAULT_MODEL
from models.loading.source import ModelSource
from models.scratch.config import EncoderConfig
from models.scratch.masked_lm import MaskedLanguageModel

VOCAB, MASK_ID = 1000, 3
FEW_STEPS = PretrainingSettings(steps=3, warmup_steps=1, batch_size=4, hidden_size=16,
                                num_heads=2, num_layers=1, intermediate_size=32)


def within(observed: float, expected: float, count: int, sigmas: float = 5.0) -> bool:
    """A share observed over `count` independent draws is within `sigmas` standard errors."""
    return abs(observed - expected) <= sigmas * math.sqrt(expected * (1 - expected) / count)


def test_the_recipe_chooses_15_percent_and_masks_80_randomises_10_keeps_10():
    ids = torch.randint(10, VOCAB, (400, 500), generator=torch.Generator().manual_seed(1))
    choosable = torch.rand(ids.shape, generator=torch.Generator().manual_seed(2)) < 0.9
    batch = mask_tokens(ids, choosable, MASK_ID, VOCAB, torch.Generator().manual_seed(3))
    eligible = int(choosable.sum())
    chosen = int(batch.chosen.sum())
    assert within(chosen / eligible, 0.15, eligible)
    assert not bool((batch.chosen & ~choosable).any())  # special and padding never chosen
    assert within(int(batch.masked.sum()) / chosen, 0.8, chosen)
    assert within(int(batch.randomised.sum()) / chosen, 0.1, chosen)
    assert within(int(batch.kept.sum()) / chosen, 0.1, chosen)
    # what the model reads: [MASK], a random token (rarely the same one), or the token itself
    assert bool((batch.inputs[batch.masked] == MASK_ID).all())
    assert bool((batch.inputs[batch.kept] == ids[batch.kept]).all())
    assert bool((batch.inputs[~batch.chosen] == ids[~batch.chosen]).all())
    unchanged = (batch.inputs[batch.randomised] == ids[batch.randomised]).float().mean()
    assert float(unchanged) < 0.01  # uniform over 1,000 ids: about 0.1% by chance
    assert bool((batch.labels[batch.chosen] == ids[batch.chosen]).all())
    assert bool((batch.labels[~batch.chosen] == IGNORED).all())


def test_another_recipe_is_followed_too_and_a_bad_one_refused():
    ids = torch.randint(10, VOCAB, (200, 200), generator=torch.Generator().manual_seed(4))
    recipe = MaskingRecipe(chosen=0.4, masked=0.5, random=0.25)
    batch = mask_tokens(ids, torch.ones_like(ids, dtype=torch.bool), MASK_ID, VOCAB,
                        torch.Generator().manual_seed(5), recipe)
    chosen = int(batch.chosen.sum())
    assert within(chosen / ids.numel(), 0.4, ids.numel())
    assert within(int(batch.masked.sum()) / chosen, 0.5, chosen)
    assert within(int(batch.kept.sum()) / chosen, 0.25, chosen)
    with pytest.raises(ValueError, match="more than 1"):
        MaskingRecipe(masked=0.8, random=0.3)


def small_model(vocab: int = 40) -> MaskedLanguageModel:
    torch.manual_seed(0)
    config = EncoderConfig(vocab_size=vocab, max_positions=32, hidden_size=16, num_heads=2,
                           num_layers=2, intermediate_size=32, dropout=0.0, norm_style="post")
    return MaskedLanguageModel(config).eval()


def test_the_loss_counts_only_the_chosen_positions():
    model = small_model()
    generator = torch.Generator().manual_seed(6)
    ids = torch.randint(5, 40, (3, 12), generator=generator)
    attention_mask = torch.ones_like(ids)
    attention_mask[2, 9:] = 0
    choosable = attention_mask.bool()
    batch = mask_tokens(ids, choosable, MASK_ID, 40, generator, MaskingRecipe(chosen=0.4))
    assert 0 < int(batch.chosen.sum()) < int(choosable.sum())
    with torch.no_grad():
        loss = float(masked_lm_loss(model, batch, attention_mask))
        logits = model(batch.inputs, None, attention_mask).logits  # (B, T, V)
    terms = []
    for row in range(ids.size(0)):  # by hand: one position at a time
        for position in range(ids.size(1)):
            if batch.chosen[row, position]:
                scores = logits[row, position].double()
                log_sum = math.log(sum(math.exp(float(s)) for s in scores))
                terms.append(log_sum - float(scores[int(ids[row, position])]))
    assert loss == pytest.approx(sum(terms) / len(terms), abs=1e-5)
    # the unchosen positions' labels never reach the loss: any other labels there, same loss
    other = replace(batch, labels=torch.where(batch.chosen, batch.labels, torch.zeros_like(ids)))
    with torch.no_grad():
        assert float(masked_lm_loss(model, other, attention_mask)) == pytest.approx(loss, abs=1e-5)


def test_pretraining_a_few_steps_is_seeded_kept_on_disk_and_read_back(default_model, tmp_path):
    tokenizer = default_model.tokenizer
    passages = masked_lm.read_corpus()[:12]
    seen = []
    first = masked_lm.pretrained(tokenizer, passages, FEW_STEPS,
                                 progress=lambda step, total, loss: seen.append((step, total)),
                                 cache_dir=tmp_path)
    assert seen == [(1, 3), (2, 3), (3, 3)]
    assert len(first.losses) == 3 and all(math.isfinite(x) for x in first.losses)
    assert first.losses[0] == pytest.approx(math.log(len(tokenizer)), rel=0.1)  # near uniform
    again = masked_lm.pretrain(tokenizer, passages, FEW_STEPS)
    assert again.losses == first.losses
    key = masked_lm.cache_key(tokenizer, passages, FEW_STEPS)
    assert masked_lm.is_kept(key, tmp_path)
    seen.clear()
    read = masked_lm.pretrained(tokenizer, passages, FEW_STEPS,
                                progress=lambda *args: seen.append(args), cache_dir=tmp_path)
    assert not seen  # read from disk, not trained again
    assert read.losses == first.losses
    for name, value in first.model.state_dict().items():
        assert torch.equal(value, read.model.state_dict()[name]), name
    other = masked_lm.cache_key(tokenizer, passages, replace(FEW_STEPS, seed=1))
    assert other != key and not masked_lm.is_kept(other, tmp_path)


def test_its_mask_fillers_and_attention_come_through_the_trace(default_model):
    tokenizer = default_model.tokenizer
    result = masked_lm.pretrain(tokenizer, masked_lm.read_corpus()[:8], FEW_STEPS)
    source = ModelSource(MASKED_LM, DEFAULT_MODEL, 0)
    runner = masked_lm_runner(source, result, tokenizer, default_model.max_tokens)
    assert runner.mask_token == "[MASK]"
    text = "the cat sat on the [MASK]."
    trace = runner.run(text)
    (fillers,) = trace.predictions.masks
    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    assert int(ids[0, fillers.position]) == tokenizer.mask_token_id
    with torch.no_grad():  # the model's own forward, no hooks
        output = result.model(ids)
    probabilities = torch.softmax(output.logits[0, fillers.position], dim=-1)
    top = probabilities.topk(len(fillers.candidates))
    assert [c.token_id for c in fillers.candidates] == top.indices.tolist()
    np.testing.assert_allclose([c.probability for c in fillers.candidates], top.values.numpy(),
                               atol=1e-5)
    for layer, weights in enumerate(output.attentions):
        np.testing.assert_allclose(trace.record.layer(layer), weights[0].numpy(), atol=1e-5)


def test_the_kind_is_registered_but_not_offered_in_the_sidebar():
    assert kinds.spec("masked-lm") is MASKED_LM
    assert MASKED_LM not in kinds.offered()
    assert ModelSource(MASKED_LM, DEFAULT_MODEL, 3).label == "masked LM (pretrained here), seed 3"


def test_next_sentence_pairs_are_half_real_continuations_half_from_another_passage():
    passages = masked_lm.read_corpus()
    pairs = masked_lm.next_sentence_pairs(passages, 2000, seed=0)
    real = [p for p in pairs if p.is_next]
    assert within(len(real) / len(pairs), 0.5, len(pairs))
    for pair in pairs[:200]:
        joined = [f"{pair.first}{mark}{pair.second}" for mark in masked_lm.NSP_SPLITS]
        assert any(text in passages for text in joined) == pair.is_next
    assert masked_lm.next_sentence_pairs(passages, 5, seed=1) == \
        masked_lm.next_sentence_pairs(passages, 5, seed=1)
