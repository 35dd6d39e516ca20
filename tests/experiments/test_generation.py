"""Generation with the key/value cache: every step's attention row equals a full forward.

The reference is one forward pass over the final sequence without the cache
(`output_attentions=True, use_cache=False`): the query that chose token s is position P + s - 1,
and its row over the first P + s keys must equal what step s kept, for every layer and head.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from models.loading.decoder import load_decoder
from models.experiments.generation import (
    MAX_NEW_TOKENS, Generation, GenerationRefused, GenerationSettings, generate,
)
from tests import tiny_models

PROMPT = "The capital of France is"
ROW_TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def smollm2():
    return load_decoder()


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    """A tiny random GPT-2 with a byte-level BPE (tests/tiny_models.py)."""
    return tiny_models.tiny_bpe_gpt2(tmp_path_factory.mktemp("tiny-gpt2-generation"))


def run(loaded, prompt: str = PROMPT, limit: int | None = None, progress=None,
        **settings) -> Generation:
    return generate(loaded.model, loaded.tokenizer, prompt, GenerationSettings(**settings),
                    token_limit=limit or loaded.max_tokens, source=loaded.name, progress=progress)


def full_forward(loaded, result: Generation):
    ids = loaded.tokenizer(PROMPT, return_tensors="pt")["input_ids"]
    sequence = torch.cat([ids, torch.tensor([result.generated_ids])], dim=1)  # (1, P + S)
    with torch.inference_mode():
        output = loaded.model(input_ids=sequence, output_attentions=True, use_cache=False)
    weights = np.stack([layer[0].numpy() for layer in output.attentions])  # (L, H, T, T)
    return ids, output.logits[0], weights


@pytest.mark.parametrize("which, steps", [("smollm2", 8), ("tiny_gpt2", 12)])
def test_cached_rows_equal_a_full_forward(which, steps, request):
    loaded = request.getfixturevalue(which)
    result = run(loaded, new_tokens=steps)
    ids, _, weights = full_forward(loaded, result)
    prompt_length = ids.size(1)
    with torch.inference_mode():
        reference = loaded.model.generate(ids, attention_mask=torch.ones_like(ids),
                                          do_sample=False, max_new_tokens=steps,
                                          pad_token_id=loaded.tokenizer.eos_token_id)
    assert result.generated_ids == tuple(reference[0, prompt_length:].tolist())
    for step in result.steps:
        read = prompt_length + step.index
        assert step.weights.shape == (weights.shape[0], weights.shape[1], read)
        assert step.weights.dtype == np.float32
        np.testing.assert_allclose(step.weights, weights[:, :, read - 1, :read], atol=ROW_TOLERANCE)
    assert result.prompt_tokens == tuple(loaded.tokenizer.convert_ids_to_tokens(ids[0].tolist()))
    assert result.nbytes == sum(step.weights.nbytes for step in result.steps)  # no (P, P) map kept
    assert result.tokens == tuple(loaded.tokenizer.convert_ids_to_tokens(
        [*ids[0].tolist(), *result.generated_ids]))


def test_smollm2_continues_with_paris_and_candidates_are_its_softmax(smollm2):
    result = run(smollm2, new_tokens=3)
    ids, logits, _ = full_forward(smollm2, result)
    first = result.steps[0]
    assert first.token.text == " Paris" and first.token.token == "ĠParis"
    assert result.generated_text.startswith(" Paris")
    for step in result.steps:
        probabilities = torch.softmax(logits[ids.size(1) + step.index - 1], dim=-1)  # (V,)
        values, indices = probabilities.topk(10)
        assert [c.token_id for c in step.candidates] == indices.tolist()
        np.testing.assert_allclose([c.probability for c in step.candidates], values.numpy(),
                                   atol=1e-5)
        assert step.token == step.candidates[0]  # greedy: the most probable


def test_sampling_is_seeded_and_leaves_the_global_generator_alone(tiny_gpt2):
    torch.manual_seed(123)
    before = torch.get_rng_state()
    settings = dict(new_tokens=10, greedy=False, temperature=1.5, top_k=40)
    first = run(tiny_gpt2, seed=7, **settings)
    again = run(tiny_gpt2, seed=7, **settings)
    other = run(tiny_gpt2, seed=8, **settings)
    assert torch.equal(torch.get_rng_state(), before)
    assert first.generated_ids == again.generated_ids
    assert first.generated_ids != other.generated_ids
    for one, two in zip(first.steps, again.steps):
        np.testing.assert_array_equal(one.weights, two.weights)


def test_sampled_candidates_are_the_tempered_top_k(tiny_gpt2):
    result = run(tiny_gpt2, new_tokens=5, greedy=False, temperature=0.7, top_k=6, seed=3)
    ids, logits, weights = full_forward(tiny_gpt2, result)
    for step in result.steps:
        read = ids.size(1) + step.index
        kept, kept_ids = (logits[read - 1] / 0.7).topk(6)
        probabilities = torch.softmax(kept, dim=-1)
        assert [c.token_id for c in step.candidates] == kept_ids.tolist()
        np.testing.assert_allclose([c.probability for c in step.candidates], probabilities,
                                   atol=1e-5)
        assert step.token.token_id in kept_ids.tolist()
        np.testing.assert_allclose(step.weights, weights[:, :, read - 1, :read], atol=ROW_TOLERANCE)


def test_progress_sink_share_and_entropy(smollm2):
    calls = []
    result = run(smollm2, new_tokens=6, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(done, 6) for done in range(1, 7)]
    first = np.stack([step.weights[..., 0] for step in result.steps])  # (S, L, H)
    np.testing.assert_allclose(result.first_token_weights(), first)
    np.testing.assert_allclose(result.sink_share(), first.mean(axis=0), rtol=1e-6, atol=1e-5)
    assert result.sink_share().shape == (30, 9)
    # The sink: some heads put far more on the first token than an even spread would.
    assert result.strongest_sink()[2] > 4 * result.even_share()
    step = result.steps[2]
    row = step.weights[4, 5].astype(np.float64)
    expected = -(row[row > 0] * np.log2(row[row > 0])).sum()
    assert abs(result.row_entropy_bits()[2, 4, 5] - expected) < 1e-5
    assert result.max_entropy_bits() == pytest.approx(np.log2(result.steps[-1].num_read))


def test_end_of_text_stops_generation(tiny_gpt2):
    free = run(tiny_gpt2, new_tokens=6)
    config = tiny_gpt2.model.generation_config
    original = config.eos_token_id
    config.eos_token_id = free.generated_ids[2]  # the third greedy token now ends the text
    try:
        stopped = run(tiny_gpt2, new_tokens=6)
    finally:
        config.eos_token_id = original
    assert stopped.stopped_at_end
    assert stopped.generated_ids == free.generated_ids[: stopped.num_steps]
    assert stopped.num_steps == free.generated_ids.index(free.generated_ids[2]) + 1
    assert not free.stopped_at_end


@pytest.mark.parametrize("prompt, new_tokens, limit, message", [
    ("   ", 5, None, "There is no prompt to continue: type some text first."),
    (PROMPT, 0, None, "Ask for at least 1 new token, not 0."),
    (PROMPT, MAX_NEW_TOKENS + 1, None,
     f"At most {MAX_NEW_TOKENS} new tokens can be generated at once, not {MAX_NEW_TOKENS + 1}."),
    (PROMPT, 1, 5, "The prompt already has 5 tokens and the app keeps at most 5 for this model, "
                   "so there is no room for new tokens: shorten it."),
    (PROMPT, 1, 3, "The prompt already has 5 tokens and the app keeps at most 3 for this model, "
                   "so there is no room for new tokens: shorten it."),
    (PROMPT, 4, 8, "The prompt has 5 tokens and the app keeps at most 8 for this model, so at "
                   "most 3 new tokens fit, not 4."),
])
def test_bad_input_is_one_sentence(smollm2, prompt, new_tokens, limit, message):
    with pytest.raises(GenerationRefused) as raised:
        run(smollm2, prompt, limit=limit, new_tokens=new_tokens)
    assert str(raised.value) == message


def test_bad_settings_are_one_sentence():
    with pytest.raises(GenerationRefused, match=r"^The temperature must be above 0, not 0\.0\.$"):
        GenerationSettings(greedy=False, temperature=0.0)
    with pytest.raises(GenerationRefused, match=r"^Top-k must keep at least 1 token, not 0\.$"):
        GenerationSettings(greedy=False, top_k=0)


def test_a_prompt_just_under_the_limit_generates(smollm2):
    result = run(smollm2, limit=8, new_tokens=3)
    assert result.num_steps == 3 and result.steps[-1].num_read == 7


def test_each_step_after_the_first_runs_one_token(tiny_gpt2, monkeypatch):
    """The cache at work: the prompt runs once, then every step feeds only the token just chosen."""
    model = tiny_gpt2.model
    seen = []
    original = model.forward

    @functools.wraps(original)
    def recording(*args, **kwargs):
        seen.append((tuple(kwargs["input_ids"].shape), kwargs["past_key_values"] is not None
                     if "past_key_values" in kwargs else False))
        return original(*args, **kwargs)

    monkeypatch.setattr(model, "forward", recording)
    result = run(tiny_gpt2, new_tokens=5)
    prompt_length = len(result.prompt_tokens)
    assert seen == [((1, prompt_length), False)] + [((1, 1), True)] * (result.num_steps - 1)
