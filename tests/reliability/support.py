"""What the hostile-input tests share: the test process's resident memory, tiny model folders to
damage, a one-tensor safetensors file, and the one-sentence check of a refusal."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "time", "flies", "like", "an", "arrow", "."]
SENTENCE = "time flies like an arrow ."
# What a refusal may add to the test process's memory: a few tens of MB for the libraries a first
# meta build imports, far below any of the models refused (4 GiB and more).
RSS_TOLERANCE_BYTES = 64 * 2**20


def rss() -> int:
    """This process's resident memory in bytes (/proc/self/statm)."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def one_sentence(message: str) -> str:
    """Assert `message` is one sentence with no trace in it; return it."""
    assert message.endswith("."), message
    assert "\n" not in message and "Traceback" not in message, message
    body = message.replace("e.g. ", "")
    assert not re.search(r"\.\s+[A-Z]", body[:-1]), message
    return message


def tokenizer() -> PreTrainedTokenizerFast:
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]")


def tiny_bert(folder: Path, **changes) -> Path:
    """A tiny random BERT (2 layers, 2 heads, width 32, 32 positions) with a word-level
    tokenizer, saved to `folder`."""
    settings = dict(vocab_size=len(WORDS), hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=2, intermediate_size=64, max_position_embeddings=32)
    torch.manual_seed(0)
    BertModel(BertConfig(**(settings | changes))).save_pretrained(folder, safe_serialization=True)
    tokenizer().save_pretrained(folder)
    return folder


def config_folder(folder: Path, settings: dict) -> Path:
    """A model folder of `settings` written as config.json as they are spelled, a tokenizer, and
    a safetensors file holding one small tensor."""
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / "config.json", settings)
    save_file({"word_embeddings.weight": torch.zeros(4, 4)}, str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    tokenizer().save_pretrained(folder)
    return folder


def nested(depth: int, opening: str = "[", closing: str = "]") -> str:
    return opening * depth + closing * depth


def write_json(path: Path, value) -> None:
    path.write_text(json.dumps(value))
