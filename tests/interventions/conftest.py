"""Models for the intervention tests: the embedded SmolLM2 (tests/conftest.py's decoder_runner),
a tiny random GPT-2 with a byte-level BPE tokenizer (float32, and float64 twins for finite
differences), and a tiny random BERT with a masked-LM head, each as the app loads a model
(models.loading.source.LoadedSource, hook points installed)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from models.loading.decoder import load_causal_lm
from models.loading.pretrained import load_pretrained
from models.loading.kinds import DECODER, PRETRAINED
from models.loading.source import LoadedSource, ModelSource
from tests import tiny_models

# Prompts the tiny models' tokenizers know (tests/tiny_models.py's sentences), as many tokens
# each: a clean and a corrupted one, the answer and the wrong token.
GPT2_CLEAN = "The cat sat on the mat and the dog sat on the"
GPT2_CORRUPTED = "The dog sat on the mat and the cat sat on the"
GPT2_ANSWER, GPT2_WRONG = "rug", "mat"
BERT_CLEAN = "the cat sat like a [MASK] ."
BERT_CORRUPTED = "the cat flies like a [MASK] ."
BERT_ANSWER, BERT_WRONG = "banana", "arrow"
IOI_CLEAN = "When Mary and John went to the store, John gave a drink to"
IOI_CORRUPTED = "When Mary and John went to the store, Paul gave a drink to"
LOUDER = 100.0
BIAS_SIZE = 0.1


def _decoder_source(folder, loaded) -> LoadedSource:
    return ModelSource(DECODER, str(folder)).load(decoder=lambda name: loaded)


@pytest.fixture(scope="session")
def gpt2_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-gpt2")
    tiny_models.tiny_bpe_gpt2(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_gpt2(gpt2_folder) -> LoadedSource:
    return _decoder_source(gpt2_folder, load_causal_lm(str(gpt2_folder)))


@pytest.fixture(scope="session")
def double_gpt2(gpt2_folder) -> LoadedSource:
    """The same tiny GPT-2 in float64: a central finite difference is then exact to ~1e-9."""
    loaded = load_causal_lm(str(gpt2_folder))
    loaded.model.double()
    return _decoder_source(gpt2_folder, loaded)


@pytest.fixture(scope="session")
def biased_gpt2(gpt2_folder) -> LoadedSource:
    """The float64 tiny GPT-2 with non-zero biases where GPT-2 starts them at 0 (every linear
    layer and norm): direct attribution must count the biases' share."""
    loaded = load_causal_lm(str(gpt2_folder))
    loaded.model.double()
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for name, parameter in loaded.model.named_parameters():
            if name.endswith("bias"):
                parameter.copy_(BIAS_SIZE * torch.randn(parameter.shape, generator=generator,
                                                        dtype=parameter.dtype))
    return _decoder_source(gpt2_folder, loaded)


@pytest.fixture(scope="session")
def linear_gpt2(gpt2_folder) -> LoadedSource:
    """The float64 tiny GPT-2 with its final LayerNorm taken out: its logits are then linear in
    the last layer's MLP output, where attribution patching must equal exact patching."""
    loaded = load_causal_lm(str(gpt2_folder))
    loaded.model.double()
    loaded.model.transformer.ln_f = nn.Identity()
    with torch.no_grad():  # a louder last MLP: the two prompts' logit differences then differ
        loaded.model.transformer.h[-1].mlp.c_proj.weight.mul_(LOUDER)
    return _decoder_source(gpt2_folder, loaded)


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> LoadedSource:
    """A tiny random BERT with its masked-LM head, loaded as the sidebar's encoder kind."""
    folder = tmp_path_factory.mktemp("tiny-bert-mlm")
    tiny_models.tiny_masked_lm(folder)
    loaded = load_pretrained(str(folder))
    return ModelSource(PRETRAINED, str(folder)).load(pretrained=lambda name: loaded)
