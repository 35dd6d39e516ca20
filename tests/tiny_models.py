"""Tiny Hugging Face models built and saved in a test folder (random weights, local tokenizers)."""

from __future__ import annotations

import torch
from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast, GPT2Config, GPT2LMHeadModel

from models.decoder import load_decoder

WORDS = ["time", "flies", "like", "an", "arrow", "fruit", "a", "banana", "the", "cat", "sat", "."]


def tiny_gpt2(folder, default_model):
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=16, n_positions=64,
                               vocab_size=len(default_model.tokenizer))).save_pretrained(folder)
    default_model.tokenizer.save_pretrained(folder)
    return load_decoder(str(folder))


def tiny_masked_lm(folder):
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    tokenizer = BertTokenizerFast(vocab={word: i for i, word in enumerate(words)},
                                  do_lower_case=True)
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=32,
                                       num_hidden_layers=2, num_attention_heads=4,
                                       intermediate_size=64, max_position_embeddings=64))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model.eval(), tokenizer
