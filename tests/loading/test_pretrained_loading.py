"""Any model id or folder loads through the same path; failures say which model and why."""

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel, GPT2Config, GPT2Model

from models.loading.pretrained import ModelLoadError, load_pretrained
from tests.reference import encoder_record


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
    record = encoder_record(loaded, "Time flies like an arrow.")
    assert record.weights.shape == (2, 2, 8, 8)
    np.testing.assert_allclose(record.weights.sum(-1), 1.0, atol=1e-5)
    assert record.source == str(tiny_bert_folder)


def test_long_text_is_truncated_to_the_models_positions(tiny_bert_folder):
    loaded = load_pretrained(str(tiny_bert_folder))
    record = encoder_record(loaded, "word " * 100)
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
    ("/no/such/folder", "there is no model folder by that name"),
    ("someone/no-such-model-anywhere", "Hugging Face Hub is turned off"),
    ("   ", "No model was given"),
])
def test_unloadable_names_give_one_clear_sentence(name, message):
    with pytest.raises(ModelLoadError, match=message) as error:
        load_pretrained(name)
    assert str(error.value).count(". ") == 0 and str(error.value).endswith(".")


def test_folder_without_config_is_refused(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(ModelLoadError, match="no model folder by that name"):
        load_pretrained(str(tmp_path))


# Issue 9's small ones: an mpnet position table (its padding row is zero) and the bertviz choice.

def test_mpnet_positions_skip_the_padding_row_and_zero_rows_are_blank(tmp_path, default_model):
    from transformers import MPNetConfig, MPNetModel

    from models.teaching.positions import cosine_similarity, learned_position_count, learned_positions
    from viz.positions import similarity_heatmap

    config = MPNetConfig(vocab_size=len(default_model.tokenizer), hidden_size=32,
                         num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                         max_position_embeddings=40, pad_token_id=1)
    torch.manual_seed(0)
    MPNetModel(config).save_pretrained(tmp_path, safe_serialization=True)
    default_model.tokenizer.save_pretrained(tmp_path)
    model = load_pretrained(str(tmp_path)).model
    table = model.embeddings.position_embeddings.weight.detach().numpy()
    assert not table[1].any() and table[0].any()  # the padding row is zero
    assert learned_position_count(model) == 38  # positions start after the padding index
    np.testing.assert_array_equal(learned_positions(model, 10), table[2:12])
    similarity = cosine_similarity(table[:6])  # the raw table, zero row included
    assert np.isnan(similarity[1]).all() and np.isnan(similarity[:, 1]).all()
    unit = table[[0, 2]] / np.linalg.norm(table[[0, 2]], axis=1, keepdims=True)
    assert similarity[0, 2] == pytest.approx(float(unit[0] @ unit[1]), abs=1e-5)
    figure = similarity_heatmap(similarity, "Learned")
    assert "blank: position 1" in figure.layout.title.text


def test_an_empty_sentence_keeps_the_bertviz_view_choice():
    from tests.app_support import run_page
    from viz.bertviz_views import MODEL_VIEW

    at = run_page("bertviz_views", text="Time flies.")
    at.radio(key="bertviz_view").set_value(MODEL_VIEW).run()
    assert at.radio(key="bertviz_view").value == MODEL_VIEW and not at.error
    at.session_state["sb_text"] = ""
    at.run()
    assert not at.get("radio") or all(r.key != "bertviz_view" for r in at.get("radio"))
    at.session_state["sb_text"] = "Time flies again."
    at.run()
    assert at.radio(key="bertviz_view").value == MODEL_VIEW and not at.error
