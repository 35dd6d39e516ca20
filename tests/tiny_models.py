"""Tiny Hugging Face models built and saved in a test folder (random weights, local tokenizers)."""

from __future__ import annotations

import torch
from tokenizers import ByteLevelBPETokenizer
from transformers import (BertConfig, BertForMaskedLM, BertTokenizerFast, GPT2Config,
                          GPT2LMHeadModel, GPT2TokenizerFast)

from models.loading.decoder import load_causal_lm, load_decoder

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


BPE_SENTENCES = ["Time flies like an arrow.", "Fruit flies like a banana.",
                 "The cat sat on the mat and the dog sat on the rug."]
END = "<|endoftext|>"


def tiny_bpe_gpt2(folder):
    """A tiny random GPT-2 (2 layers, 4 heads, 64 positions) with GPT-2's own kind of tokenizer,
    a byte-level BPE trained here (so "Ġ" marks a space), whose end-of-text token ends a
    generation; saved to `folder` and loaded the app's way."""
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(BPE_SENTENCES * 3, vocab_size=300, min_frequency=1,
                            special_tokens=[END], show_progress=False)
    tokenizer = GPT2TokenizerFast(tokenizer_object=bpe._tokenizer, bos_token=END, eos_token=END,
                                  unk_token=END)
    end_id = tokenizer.convert_tokens_to_ids(END)
    torch.manual_seed(1)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=64, n_embd=32,
                                       n_layer=2, n_head=4, bos_token_id=end_id,
                                       eos_token_id=end_id))
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return load_causal_lm(str(folder))
