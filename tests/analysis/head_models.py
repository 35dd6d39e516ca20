"""Tiny BERT / GPT-2 / Llama models with random weights, hooks installed, for the head analyses
(tests/analysis/test_head_analysis.py) and the ablation tests (tests/experiments/
test_head_ablation.py); import the fixtures a module uses."""

from __future__ import annotations

import pytest
import torch
from tokenizers import ByteLevelBPETokenizer
from transformers import (BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel,
                          GPT2TokenizerFast, LlamaConfig, LlamaForCausalLM)

from models.experiments import ablation, targets
from models.hooks.install import install
from models.loading.tokenize import EncodedText

SENTENCE = "Time flies like an arrow."
LONGER = "The quick brown fox jumps over the lazy dog while the cat watches from the mat."
END = "<|endoftext|>"
INIT = 0.2  # larger than the default 0.02, so one head visibly moves a prediction


@pytest.fixture(scope="module")
def gpt2_tokenizer() -> GPT2TokenizerFast:
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator([SENTENCE, "Fruit flies like a banana.", LONGER] * 4, vocab_size=320,
                            min_frequency=1, special_tokens=[END], show_progress=False)
    return GPT2TokenizerFast(tokenizer_object=bpe._tokenizer, bos_token=END, eos_token=END,
                             unk_token=END)


@pytest.fixture(scope="module")
def tiny_gpt2(gpt2_tokenizer) -> GPT2LMHeadModel:
    torch.manual_seed(0)
    end = gpt2_tokenizer.convert_tokens_to_ids(END)
    config = GPT2Config(vocab_size=len(gpt2_tokenizer), n_positions=64, n_embd=32, n_layer=2,
                        n_head=4, bos_token_id=end, eos_token_id=end,
                        initializer_range=INIT)
    return install(GPT2LMHeadModel(config).eval())


@pytest.fixture(scope="module")
def tiny_llama() -> LlamaForCausalLM:
    torch.manual_seed(1)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64, initializer_range=INIT)
    return install(LlamaForCausalLM(config).eval())


@pytest.fixture(scope="module")
def tiny_bert(default_model) -> BertForMaskedLM:
    torch.manual_seed(2)
    config = BertConfig(vocab_size=len(default_model.tokenizer), hidden_size=32,
                        num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                        max_position_embeddings=64, initializer_range=INIT)
    return install(BertForMaskedLM(config).eval())


def llama_input(count: int = 9) -> targets.PreparedInput:
    """Hand-made ids for the tiny Llama (it has no tokenizer)."""
    ids = torch.tensor([[5, 17, 33, 8, 41, 17, 33, 2, 60][:count]])  # (1, T)
    encoded = EncodedText(
        input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=None,
        tokens=tuple(f"t{i}" for i in ids[0].tolist()), segment_ids=(0,) * ids.size(1),
        special_positions=(), dropped_tokens=0)
    inputs = {"input_ids": ids, "attention_mask": encoded.attention_mask}
    return targets.PreparedInput(encoded, inputs, True, "tiny llama")


class Ids:
    """A stand-in tokenizer for the tiny Llama: ids are written as t<id>."""

    def decode(self, ids, **_):
        return " ".join(f"t{i}" for i in ids)

    def convert_ids_to_tokens(self, ids):
        return f"t{ids}" if isinstance(ids, int) else [f"t{i}" for i in ids]


def plain_logits(model, prepared) -> torch.Tensor:
    with torch.inference_mode():
        return model(**prepared.inputs).logits

