"""Given the real pretrained weights, the from-scratch encoder reproduces BERT exactly."""

import numpy as np
import pytest
import torch

from models.loading.pretrained import DEFAULT_MODEL
from models.loading.kinds import PRETRAINED, SCRATCH_COPIED
from models.loading.source import LoadedSource, ModelSource
from models.loading.tokenize import encode
from models.scratch.transfer import config_from_bert, encoder_from_bert
from tests.reference import reference_attentions

TOLERANCE = 1e-5
LONG_TEXT = " ".join(f"token{i} flies like an arrow," for i in range(200))  # > 512 tokens

INPUTS = [
    ("Time flies like an arrow.", None),
    ("time flies like an arrow", "fruit flies like a banana"),
    ("x", None),
    ("Émile a vu 東京 🚀 at 3.14 o'clock — שלום‎ zero\u200bwidth!", None),
    (LONG_TEXT, None),
    (LONG_TEXT, LONG_TEXT),
]


@pytest.fixture(scope="module")
def copied(default_model):
    return encoder_from_bert(default_model.model)


def app_record(default_model, kind: str, text: str, pair: str | None = None):
    """The record the app's one run path gives for `kind` on the input."""
    runner = ModelSource(kind, DEFAULT_MODEL).load(pretrained=lambda name: default_model)
    return runner.run(text, pair).record


def scratch_record(encoder, default_model, text: str, pair: str | None = None):
    runner = LoadedSource(ModelSource(SCRATCH_COPIED, DEFAULT_MODEL), encoder,
                          default_model.tokenizer, 512, "positions")
    return runner.run(text, pair).record


@pytest.mark.parametrize("text, pair", INPUTS, ids=["sentence", "pair", "one-char",
                                                     "unicode", "512-tokens", "512-pair"])
def test_attentions_and_hidden_states_match(default_model, copied, text, pair):
    reference = reference_attentions(default_model, text, pair)
    ours = scratch_record(copied, default_model, text, pair)
    assert ours.tokens == app_record(default_model, PRETRAINED, text, pair).tokens
    assert ours.weights.shape == reference.shape == (6, 12, ours.num_tokens, ours.num_tokens)
    assert np.abs(ours.weights - reference).max() <= TOLERANCE

    encoded = encode(default_model.tokenizer, text, pair, default_model.max_tokens)
    with torch.inference_mode():
        expected = default_model.model(**encoded.model_inputs()).last_hidden_state
        got = copied(encoded.input_ids, encoded.token_type_ids, encoded.attention_mask)
    assert (got.last_hidden_state - expected).abs().max().item() <= TOLERANCE


def test_long_inputs_fill_all_512_positions(default_model):
    record = app_record(default_model, PRETRAINED, LONG_TEXT)
    assert record.num_tokens == 512
    full = len(default_model.tokenizer(LONG_TEXT, verbose=False)["input_ids"])
    assert record.dropped_tokens == full - 512 > 0
    pair = app_record(default_model, PRETRAINED, LONG_TEXT, LONG_TEXT)
    assert pair.num_tokens == 512 and pair.is_pair


def test_pair_segments_and_special_tokens(default_model):
    record = app_record(default_model, PRETRAINED, "time flies", "fruit flies")
    assert record.tokens == ("[CLS]", "time", "flies", "[SEP]", "fruit", "flies", "[SEP]")
    assert record.segment_ids == (0, 0, 0, 0, 1, 1, 1)
    assert record.special_positions == (0, 3, 6)


def test_random_weights_do_not_match(default_model, copied):
    copied_config = config_from_bert(default_model.model.config)
    assert copied_config.norm_style == "post"
    other = encoder_from_bert(default_model.model)
    with torch.no_grad():
        other.layers[0].attention.query.weight.add_(0.05)
    text = "Time flies like an arrow."
    reference = reference_attentions(default_model, text)
    changed = scratch_record(other, default_model, text)
    assert np.abs(changed.weights[0] - reference[0]).max() > 1e-3


def test_copying_from_a_non_bert_config_raises(default_model):
    config = default_model.model.config.__class__(**default_model.model.config.to_dict())
    config.hidden_act = "relu"
    with pytest.raises(ValueError, match="GELU"):
        config_from_bert(config)
