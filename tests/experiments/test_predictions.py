"""Predictions summarised from logits equal the softmax of the model's own logits.

Checked on the real SmolLM2, on a tiny random GPT-2 with a byte-level BPE (tests/tiny_models.py)
and on a tiny BertForMaskedLM built and saved here with a WordPiece vocabulary trained on a few
sentences.
"""

from __future__ import annotations

import math

import pytest
import torch
from tokenizers import BertWordPieceTokenizer
from transformers import (
    AutoModelForMaskedLM, AutoTokenizer, BertConfig, BertForMaskedLM, PreTrainedTokenizerFast,
)

from models.loading.decoder import load_decoder
from models.experiments.predictions import masked_fillers, next_token, per_position
from tests import tiny_models

SENTENCES = ["Time flies like an arrow.", "Fruit flies like a banana.",
             "The cat sat on the mat and the dog sat on the rug."]
TOLERANCE = 1e-6


@pytest.fixture(scope="module")
def smollm2():
    return load_decoder()


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    """A tiny random GPT-2 with a byte-level BPE (tests/tiny_models.py)."""
    return tiny_models.tiny_bpe_gpt2(tmp_path_factory.mktemp("tiny-gpt2-predictions"))


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    """A tiny random BertForMaskedLM with a WordPiece vocabulary trained here."""
    wordpiece = BertWordPieceTokenizer(lowercase=True)
    wordpiece.train_from_iterator(SENTENCES * 3, vocab_size=120, min_frequency=1,
                                  special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                  show_progress=False)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=wordpiece._tokenizer, unk_token="[UNK]",
                                        pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
                                        mask_token="[MASK]")
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=32,
                                       num_hidden_layers=2, num_attention_heads=2,
                                       intermediate_size=64, max_position_embeddings=64))
    folder = tmp_path_factory.mktemp("tiny-bert-mlm")
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    loaded = AutoModelForMaskedLM.from_pretrained(folder, attn_implementation="eager",
                                                  use_safetensors=True, trust_remote_code=False)
    return loaded.eval(), AutoTokenizer.from_pretrained(folder)


def forward(model, tokenizer, text: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(T, V) logits and (T,) ids, straight from the model."""
    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        logits = model(input_ids=ids).logits
    return logits[0], ids[0]


def assert_top_k_is_softmax(candidates, logits_row: torch.Tensor, k: int) -> None:
    reference = torch.softmax(logits_row, dim=-1)
    values, indices = reference.topk(k)
    assert [c.token_id for c in candidates] == indices.tolist()
    for candidate, value in zip(candidates, values.tolist()):
        assert math.isclose(candidate.probability, value, abs_tol=TOLERANCE)


def test_smollm2_says_paris_first(smollm2):
    logits, _ = forward(smollm2.model, smollm2.tokenizer, "The capital of France is")
    result = next_token(logits[-1], smollm2.tokenizer)
    first = result.candidates[0]
    assert (first.text, first.token) == (" Paris", "ĠParis")
    assert len(result.candidates) == 10
    assert_top_k_is_softmax(result.candidates, logits[-1], 10)
    probabilities = [c.probability for c in result.candidates]
    assert probabilities == sorted(probabilities, reverse=True)


@pytest.mark.parametrize("which", ["smollm2", "tiny_gpt2"])
def test_per_position_losses_are_the_cross_entropy(which, request):
    loaded = request.getfixturevalue(which)
    logits, ids = forward(loaded.model, loaded.tokenizer, SENTENCES[2])
    result = per_position(logits, ids, loaded.tokenizer, k=5)
    assert len(result.positions) == len(ids) - 1
    reference = torch.softmax(logits, dim=-1)  # (T, V)
    for prediction in result.positions:
        p = prediction.position
        actual = int(ids[p + 1])
        assert prediction.actual.token_id == actual
        assert prediction.actual.token == loaded.tokenizer.convert_ids_to_tokens(actual)
        assert math.isclose(prediction.actual.probability, float(reference[p, actual]),
                            abs_tol=TOLERANCE)
        assert math.isclose(prediction.loss_nats, -math.log(reference[p, actual]), rel_tol=1e-4)
        assert math.isclose(prediction.loss_bits, prediction.loss_nats / math.log(2))
        assert_top_k_is_softmax(prediction.candidates, logits[p], 5)
    mean = torch.nn.functional.cross_entropy(logits[:-1], ids[1:]).item()
    assert math.isclose(result.mean_loss_nats, mean, rel_tol=1e-5)
    assert math.isclose(result.perplexity, math.exp(mean), rel_tol=1e-5)
    assert math.isclose(result.mean_loss_bits, mean / math.log(2), rel_tol=1e-5)


def test_rank_of_the_actual_token(smollm2):
    logits, ids = forward(smollm2.model, smollm2.tokenizer, "The capital of France is Paris")
    last = per_position(logits, ids, smollm2.tokenizer).positions[-1]
    assert last.actual.text == " Paris"
    assert last.rank == 1
    assert last.loss_nats < 0.5  # the model gives " Paris" about 0.77


def test_the_position_table_has_one_type_per_column(smollm2):
    """Ranks in and outside the kept candidates side by side still make one Arrow column."""
    import pyarrow

    from viz.predictions import position_table

    logits, ids = forward(smollm2.model, smollm2.tokenizer, "The capital of France is Paris zebra")
    result = per_position(logits, ids, smollm2.tokenizer, k=3)
    table = position_table(result, tuple(smollm2.tokenizer.convert_ids_to_tokens(ids.tolist())))
    ranks = table["rank"].tolist()
    assert "1" in ranks and "> 3" in ranks
    pyarrow.Table.from_pandas(table)  # what st.dataframe does; mixed int/str columns raise here


def test_tiny_gpt2_next_token_is_its_softmax(tiny_gpt2):
    logits, _ = forward(tiny_gpt2.model, tiny_gpt2.tokenizer, SENTENCES[0])
    result = next_token(logits[-1], tiny_gpt2.tokenizer, k=7)
    assert_top_k_is_softmax(result.candidates, logits[-1], 7)
    for candidate in result.candidates:  # readable form: the byte-level "Ġ" is a space
        assert "Ġ" not in candidate.text
        assert candidate.text == tiny_gpt2.tokenizer.decode([candidate.token_id])


def test_masked_fillers_are_the_masked_lm_softmax(tiny_bert):
    model, tokenizer = tiny_bert
    logits, ids = forward(model, tokenizer, "the cat [MASK] on the [MASK] .")
    fillers = masked_fillers(logits, ids, tokenizer.mask_token_id, tokenizer)
    expected = (ids == tokenizer.mask_token_id).nonzero()[:, 0].tolist()
    assert [f.position for f in fillers] == expected and len(expected) == 2
    for filler in fillers:
        assert len(filler.candidates) == 10
        assert_top_k_is_softmax(filler.candidates, logits[filler.position], 10)
        assert all(c.token == tokenizer.convert_ids_to_tokens(c.token_id) for c in filler.candidates)


def test_no_mask_in_the_text_is_one_sentence(tiny_bert):
    model, tokenizer = tiny_bert
    logits, ids = forward(model, tokenizer, "the cat sat on the mat .")
    with pytest.raises(ValueError, match=r"^The text has no \[MASK\] to fill in: type \[MASK\] "
                                         r"where a word should go\.$"):
        masked_fillers(logits, ids, tokenizer.mask_token_id, tokenizer)
    with pytest.raises(ValueError, match="has no mask token"):
        masked_fillers(logits, ids, None, tokenizer)


def test_bad_shapes_and_k_are_refused(tiny_gpt2):
    logits, ids = forward(tiny_gpt2.model, tiny_gpt2.tokenizer, SENTENCES[0])
    with pytest.raises(ValueError, match=r"\(V,\)"):
        next_token(logits, tiny_gpt2.tokenizer)
    with pytest.raises(ValueError, match="must match"):
        per_position(logits, ids[:-1], tiny_gpt2.tokenizer)
    with pytest.raises(ValueError, match="single token"):
        per_position(logits[:1], ids[:1], tiny_gpt2.tokenizer)
    with pytest.raises(ValueError, match="at least one candidate"):
        next_token(logits[-1], tiny_gpt2.tokenizer, k=0)
    batched = per_position(logits[None], ids[None], tiny_gpt2.tokenizer, k=3)  # (1, T, V) works
    assert batched == per_position(logits, ids, tiny_gpt2.tokenizer, k=3)
