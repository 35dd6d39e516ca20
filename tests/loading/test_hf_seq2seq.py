"""Hugging Face encoder–decoders (tiny T5, BART and Marian built here, random weights, local
word-level tokenizers): the records are transformers' own attentions, read from a twin of the
model loaded with plain eager attention and no hook points."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import (AutoModelForSeq2SeqLM, BartConfig, BartForConditionalGeneration,
                          BertConfig, BertModel, GPT2Config, GPT2LMHeadModel, MarianConfig,
                          MarianMTModel, PreTrainedTokenizerFast, T5Config,
                          T5ForConditionalGeneration)

from models.hooks.attention import ATTENTION_NAME
from models.errors import ModelLoadError
from models.loading.hf_seq2seq import MAX_TARGET_TOKENS, load_seq2seq, run_seq2seq

WORDS = ("the red car is fast la voiture rouge est rapide she sees green books elle voit les "
         "livres verts a an of . ,").split()
SPECIALS = ("<pad>", "</s>", "<unk>", "<s>")  # ids 0, 1, 2, 3
PAD, EOS, BOS = 0, 1, 3
SOURCE = "the red car is fast ."
TARGET = "la voiture rouge est rapide ."
SIZES = dict(d_model=16, max_position_embeddings=64, vocab_size=len(SPECIALS) + len(WORDS))


def save_tokenizer(folder: Path) -> None:
    vocabulary = {token: i for i, token in enumerate(SPECIALS + tuple(WORDS))}
    tokenizer = Tokenizer(models.WordLevel(vocabulary, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A $B </s>", special_tokens=[("</s>", EOS)])
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", eos_token="</s>",
                            unk_token="<unk>", bos_token="<s>").save_pretrained(folder)


def build(kind: str, folder: Path) -> Path:
    torch.manual_seed(0)
    special = dict(pad_token_id=PAD, eos_token_id=EOS, bos_token_id=BOS, forced_eos_token_id=None)
    if kind == "t5":
        model = T5ForConditionalGeneration(T5Config(
            vocab_size=SIZES["vocab_size"], d_model=16, d_kv=4, d_ff=32, num_layers=2,
            num_decoder_layers=3, num_heads=4, decoder_start_token_id=PAD, **special))
    elif kind == "bart":
        model = BartForConditionalGeneration(BartConfig(
            encoder_layers=2, decoder_layers=3, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32,
            decoder_start_token_id=EOS, **SIZES, **special))
    else:
        model = MarianMTModel(MarianConfig(
            encoder_layers=2, decoder_layers=3, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32,
            decoder_start_token_id=PAD, **SIZES, **special))
    model.save_pretrained(folder, safe_serialization=True)
    save_tokenizer(folder)
    return folder


def eager_twin(folder: Path):
    """The same weights loaded with transformers' plain eager attention, no hook points."""
    return AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager").eval()


@pytest.fixture(scope="module", params=["t5", "bart", "marian"])
def tiny(request, tmp_path_factory):
    folder = build(request.param, tmp_path_factory.mktemp(request.param))
    return request.param, load_seq2seq(str(folder)), eager_twin(folder)


def reference(loaded, twin, decoder_ids):
    """transformers' own forward with attentions, on the same ids, by the eager twin."""
    inputs = loaded.tokenizer(SOURCE, return_tensors="pt")
    with torch.no_grad():
        return inputs, twin(**inputs, decoder_input_ids=torch.tensor([decoder_ids]),
                            output_attentions=True)


def stacked(attentions) -> np.ndarray:
    return torch.stack(attentions, dim=1)[0].numpy()  # (L, H, Q, K)


def test_loader_uses_eager_attention_and_the_tokenizer(tiny):
    kind, loaded, _ = tiny
    # the app's capturing attention: the model's own eager function, weights returned
    assert loaded.model.config._attn_implementation == ATTENTION_NAME
    assert loaded.model.config.model_type == kind
    assert not loaded.model.training


def test_given_target_records_equal_transformers_attentions(tiny):
    _, loaded, twin = tiny
    run = run_seq2seq(loaded, SOURCE, TARGET)
    start = loaded.model.config.decoder_start_token_id
    target_ids = loaded.tokenizer(text_target=TARGET)["input_ids"]
    inputs, expected = reference(loaded, twin, [start] + target_ids[:-1])
    assert not run.generated
    assert run.source_tokens == tuple(SOURCE.split()) + ("</s>",)
    assert run.output_tokens == tuple(TARGET.split()) + ("</s>",)
    assert run.decoder_tokens[1:] == tuple(TARGET.split())
    np.testing.assert_allclose(run.encoder.weights, stacked(expected.encoder_attentions), atol=1e-5)
    np.testing.assert_allclose(run.decoder.weights, stacked(expected.decoder_attentions), atol=1e-5)
    np.testing.assert_allclose(run.cross.weights, stacked(expected.cross_attentions), atol=1e-5)
    assert run.cross.weights.shape == (3, 4, len(TARGET.split()) + 1, inputs["input_ids"].size(1))
    assert run.encoder.weights.shape[:2] == (2, 4)
    assert run.cross.key_tokens == run.source_tokens and run.cross.tokens == run.decoder_tokens
    np.testing.assert_allclose(run.cross.weights.sum(-1), 1.0, atol=1e-5)  # over source tokens
    assert np.all(np.triu(run.decoder.weights, k=1) == 0.0)
    assert run.decoder.masks == ("causal",)


def test_greedy_output_is_transformers_greedy_generation(tiny):
    _, loaded, twin = tiny
    run = run_seq2seq(loaded, SOURCE, max_new_tokens=6)
    inputs = loaded.tokenizer(SOURCE, return_tensors="pt")
    with torch.no_grad():
        expected = loaded.model.generate(**inputs, do_sample=False, num_beams=1, max_new_tokens=6,
                                         min_new_tokens=0, use_cache=False)[0, 1:].tolist()
    produced = loaded.tokenizer.convert_tokens_to_ids(list(run.output_tokens))
    assert produced == expected[:len(produced)] and 1 <= len(produced) <= 6
    assert run.generated
    start = loaded.model.config.decoder_start_token_id
    _, reference_output = reference(loaded, twin, [start] + produced[:-1])
    np.testing.assert_allclose(run.cross.weights, stacked(reference_output.cross_attentions),
                               atol=1e-5)
    assert run.cross.num_tokens == len(produced)


def test_bad_input_gives_one_sentence(tiny):
    _, loaded, _ = tiny
    for source, target, message in [("   ", None, "Type a source text"),
                                    (" ".join(["red"] * 200), None, "at most"),
                                    (SOURCE, " ".join(["rouge"] * (MAX_TARGET_TOKENS + 1)),
                                     "target text is")]:
        with pytest.raises(ValueError, match=message) as error:
            run_seq2seq(loaded, source, target)
        assert str(error.value).count(". ") == 0 and str(error.value).endswith(".")


@pytest.mark.parametrize("kind", ["gpt2", "bert"])
def test_decoder_only_or_encoder_only_is_refused_in_one_sentence(tmp_path, kind):
    if kind == "gpt2":
        GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=40,
                                   n_positions=16)).save_pretrained(tmp_path)
        expected = "decoder only"
    else:
        BertModel(BertConfig(num_hidden_layers=1, num_attention_heads=2, hidden_size=8,
                             intermediate_size=16, vocab_size=40)).save_pretrained(tmp_path)
        expected = "encoder only"
    save_tokenizer(tmp_path)
    with pytest.raises(ModelLoadError, match=expected) as error:
        load_seq2seq(str(tmp_path))
    message = str(error.value)
    assert message.endswith(".") and message.count(". ") == 0 and "encoder–decoder" in message
    with pytest.raises(ModelLoadError, match="no model folder by that name"):
        load_seq2seq(str(tmp_path / "missing"))


def test_weights_are_read_only_from_safetensors(tmp_path):
    folder = build("bart", tmp_path / "bart")
    for file in folder.glob("*.safetensors"):
        file.unlink()
    with pytest.raises(ModelLoadError, match="safetensors"):
        load_seq2seq(str(folder))


def test_bertviz_encoder_decoder_views_are_offline_and_hold_the_tokens(tiny):
    import re

    from viz.bertviz_views import VIEWS, encoder_decoder_html, shared_layers

    _, loaded, _ = tiny
    run = run_seq2seq(loaded, SOURCE, "la voiture <b>rouge</b>")
    for view in VIEWS:
        html = encoder_decoder_html(run.encoder, run.decoder, run.cross, view)
        assert not re.search(r"<script[^>]*\bsrc\s*=\s*[\"']?https?:", html, re.I)
        assert not re.search(r"\b(?:src|href)\s*=\s*[\"']?https?:", html, re.I)
        params = json.loads(re.search(r"const params = (\{.*?\}); // HACK", html).group(1))
        by_name = {entry["name"]: entry for entry in params["attention"]}
        assert set(by_name) == {"Encoder", "Decoder", "Cross"}
        assert by_name["Cross"]["left_text"] == list(run.decoder_tokens)
        assert by_name["Cross"]["right_text"] == list(run.source_tokens)
        assert "voiture" in by_name["Decoder"]["left_text"]
        # bertviz has one layer menu: with 2 encoder and 3 decoder layers it draws 2 of each
        assert shared_layers(run.encoder, run.decoder) == 2
        np.testing.assert_allclose(np.array(by_name["Cross"]["attn"]),
                                   run.cross.weights[:2].round(3), atol=1e-9)
    with pytest.raises(ValueError, match="cross-attention must read"):
        encoder_decoder_html(run.encoder, run.encoder, run.cross, VIEWS[0])
