"""Any model id or folder loads through the same path; failures say which model and why."""

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel, GPT2Config, GPT2Model

from models.pretrained import ModelLoadError, load_pretrained, run_pretrained


@pytest.fixture(scope="module")
def tiny_bert_folder(tmp_path_factory, default_model):
    folder = tmp_path_factory.mktemp("tiny-bert")
    config = BertConfig(vocab_size=len(default_model.tokenizer), hidden_size=32,
                        num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=64)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(folder, safe_serialization=True)
    default_model.tokenizer.save_pretrained(folder)
    return folder


def test_local_bert_folder_loads_and_returns_its_attentions(tiny_bert_folder):
    loaded = load_pretrained(str(tiny_bert_folder))
    assert loaded.max_tokens == 64
    record = run_pretrained(loaded, "Time flies like an arrow.")
    assert record.weights.shape == (2, 2, 8, 8)
    np.testing.assert_allclose(record.weights.sum(-1), 1.0, atol=1e-5)
    assert record.source == str(tiny_bert_folder)


def test_long_text_is_truncated_to_the_models_positions(tiny_bert_folder):
    loaded = load_pretrained(str(tiny_bert_folder))
    record = run_pretrained(loaded, "word " * 100)
    assert record.num_tokens == 64
    assert record.dropped_tokens == 102 - 64


def test_folder_with_only_pickled_weights_is_refused(tmp_path, tiny_bert_folder):
    folder = tmp_path / "pickled"
    folder.mkdir()
    (folder / "config.json").write_text((tiny_bert_folder / "config.json").read_text())
    (folder / "pytorch_model.bin").write_bytes(b"not loaded")
    with pytest.raises(ModelLoadError, match=r"'.*pickled': it has no \.safetensors weights"):
        load_pretrained(str(folder))


def test_decoder_is_not_a_bert_like_encoder(tmp_path):
    GPT2Model(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=100)).save_pretrained(
        tmp_path, safe_serialization=True)
    with pytest.raises(ModelLoadError, match="it is a 'gpt2' model"):
        load_pretrained(str(tmp_path))


@pytest.mark.parametrize("name, message", [
    ("/no/such/folder", "there is no such folder"),
    ("someone/no-such-model-anywhere", "Hugging Face Hub cannot be reached"),
    ("   ", "No model was given"),
])
def test_unloadable_names_give_one_clear_sentence(name, message):
    with pytest.raises(ModelLoadError, match=message) as error:
        load_pretrained(name)
    assert str(error.value).count(". ") == 0 and str(error.value).endswith(".")


def test_folder_without_config_is_refused(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_pretrained(str(tmp_path))
