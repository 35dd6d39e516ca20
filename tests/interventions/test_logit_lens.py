"""The logit lens (models/experiments/logit_lens.py): its last row is the model's own prediction
(a plain forward, no hook points), and every row is the model's own final norm and head applied
by hand to transformers' own hidden state of that layer; a masked LM is read the same way."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.experiments import logit_lens, targets
from models.experiments.contrast import prompt
from tests.interventions.support import one_sentence

FACT = "The Eiffel Tower is in the city of"
MASKED = "the cat sat like a [MASK] ."


def _plain(loaded, text: str):
    """A plain forward: (T, V) logits and every hidden state transformers hands back."""
    given = prompt(loaded, text)
    with torch.inference_mode():
        output = loaded.model(**given.batched(loaded.model, 1), output_hidden_states=True)
    return output.logits[0].float(), output.hidden_states


def _by_hand(loaded, hidden: torch.Tensor) -> torch.Tensor:
    """(T, V) logits of one hidden state (1, T, D) through the final norm and the head, module
    by module: Llama's model.norm then lm_head; BERT's masked-LM head (cls)."""
    model = loaded.model
    with torch.inference_mode():
        if hasattr(model, "cls"):
            return model.cls(hidden)[0].float()
        return model.lm_head(model.model.norm(hidden))[0].float()


@pytest.mark.parametrize("name, text", [("decoder_runner", FACT), ("tiny_gpt2", "The cat sat on"),
                                        ("tiny_bert", MASKED)])
def test_the_last_row_is_the_models_own_prediction(request, name, text):
    loaded = request.getfixturevalue(name)
    lens = logit_lens.logit_lens(loaded, text)
    logits, _ = _plain(loaded, text)
    probabilities = torch.softmax(logits, dim=-1).numpy()  # (T, V)
    final_ids = probabilities.argmax(axis=-1)
    np.testing.assert_array_equal(lens.final_ids, final_ids)
    np.testing.assert_array_equal(lens.top_ids[-1, :, 0], final_ids)
    rows = np.arange(len(final_ids))
    np.testing.assert_allclose(lens.final_probability[-1], probabilities[rows, final_ids],
                               atol=1e-5)
    top = np.sort(probabilities, axis=-1)[:, ::-1][:, :lens.top_ids.shape[-1]]
    np.testing.assert_allclose(lens.top_probabilities[-1], top, atol=1e-5)
    assert lens.chosen_id == final_ids[lens.position]
    assert (lens.chosen_rank[-1, lens.position] == 1)
    assert lens.rows[0] == "embeddings" and lens.rows[-1] == f"layer {len(lens.rows) - 2}"


def test_every_row_of_the_decoder_is_its_hidden_state_through_norm_and_head(decoder_runner):
    lens = logit_lens.logit_lens(decoder_runner, FACT, "Paris")
    _, hidden = _plain(decoder_runner, FACT)
    assert lens.chosen_text == " Paris" and len(lens.rows) == 31
    for row in range(30):  # hidden_states[l]: what layer l reads (the last one is normed)
        logits = _by_hand(decoder_runner, hidden[row])  # (T, V)
        expected = torch.softmax(logits, dim=-1)
        np.testing.assert_allclose(lens.chosen_probability[row], expected[:, lens.chosen_id],
                                   atol=1e-5)
        np.testing.assert_allclose(
            lens.final_probability[row],
            expected[torch.arange(len(lens.tokens)), torch.from_numpy(lens.final_ids)],
            atol=1e-5)
        chosen = logits[lens.position, lens.chosen_id]
        assert lens.chosen_rank[row, lens.position] == 1 + int(
            (logits[lens.position] > chosen).sum())
    assert lens.chosen_rank[-1, lens.position] == 1 and lens.chosen_rank[0, lens.position] > 100


def test_every_row_of_a_masked_lm_is_its_hidden_state_through_its_head(tiny_bert):
    lens = logit_lens.logit_lens(tiny_bert, MASKED, "banana")
    _, hidden = _plain(tiny_bert, MASKED)
    assert lens.position == 6 and lens.tokens[6] == "[MASK]"
    assert len(hidden) == len(lens.rows)  # BERT hands back every layer's output
    for row, state in enumerate(hidden):
        expected = torch.softmax(_by_hand(tiny_bert, state), dim=-1)
        np.testing.assert_allclose(lens.chosen_probability[row], expected[:, lens.chosen_id],
                                   atol=1e-5)


def test_reading_a_few_rows_at_a_time_changes_nothing(decoder_runner, monkeypatch):
    whole = logit_lens.logit_lens(decoder_runner, FACT, "Paris")
    rows = len(whole.rows)
    vocabulary = decoder_runner.model.config.vocab_size
    monkeypatch.setattr(logit_lens, "LENS_CHUNK_BYTES",  # four rows at a time
                        4 * logit_lens.COPIES_PER_ROW * logit_lens.FLOAT_BYTES * 9 * vocabulary)
    chunked = logit_lens.logit_lens(decoder_runner, FACT, "Paris")
    assert rows > 4
    np.testing.assert_allclose(chunked.chosen_probability, whole.chosen_probability, atol=1e-5)
    np.testing.assert_array_equal(chunked.top_ids, whole.top_ids)


def test_what_the_lens_refuses_is_one_sentence(encoder_runner, tiny_bert, decoder_runner):
    with pytest.raises(targets.NoPrediction):
        logit_lens.logit_lens(encoder_runner, "Time flies like an arrow.")
    for loaded, text, chosen, part in (
            (tiny_bert, "the cat sat like a banana .", None, "has no [MASK]"),
            (decoder_runner, FACT, "Eiffel", "is 2 tokens for this model"),
            (decoder_runner, "   ", None, "prompt is empty")):
        with pytest.raises(ValueError) as raised:
            logit_lens.logit_lens(loaded, text, chosen)
        assert part in str(raised.value) and one_sentence(str(raised.value))
