"""One model of every kind, with its hook points, and what the hook tests compare it against.

Each `Case` holds a model with its points (a Hugging Face model loaded through the app's
loaders, or a from-scratch model), the inputs of one forward, and where the test may look for
independent references: a twin of the Hugging Face model loaded with transformers' plain eager
attention and NO hook points (same weights), and the paths of the modules a hand-written torch
hook reads or edits. The paths are written here, per family, rather than read from
models/hooks/install.py's layouts, so the tests do not take the engine's word for where things
are.

Dimensions: B batch, T tokens, S source tokens, D model width, H heads, Dh head width.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn
from transformers import (AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM,
                          AutoModelForSeq2SeqLM, BertTokenizerFast, DistilBertConfig,
                          DistilBertForMaskedLM, MBartConfig, MBartForConditionalGeneration)

from models.loading.conversion import converted_folder
from models.loading.hf_seq2seq import load_seq2seq
from models.loading.pretrained import default_model_path, load_pretrained
from models.scratch.build import random_encoder
from models.scratch.config import EncoderConfig
from models.scratch.seq2seq import Seq2SeqConfig, Seq2SeqModel
from tests import tiny_models
from tests.loading.test_hf_seq2seq import SPECIALS, WORDS, save_tokenizer
from tests.loading.test_hf_seq2seq import build as build_seq2seq

SEED = 0
TOKENS = 7  # every case's input length (decoder inputs of the encoder-decoders: 5)
TARGETS = 5


@dataclass(frozen=True)
class Family:
    """Where a family's layer keeps what a hand-written hook reads or edits (paths inside one
    layer; a number indexes a module list, from the end when negative). `out`: the attention's
    output projection W_O (its input is the heads side by side, its output the attention
    output); `cross_out`: the cross-attention's; `attention`: the self-attention module (its
    first output is the attention output); `mlp`: the module whose output is the MLP output;
    `mid`: the module whose output is the residual stream between the sublayers of a
    post-norm layer; `up`: the MLP's first linear (its output is mlp_pre); `down`: its last
    (its input is mlp_post); `ln1`, `ln2`: the norms a pre-norm layer's sublayers read."""

    out: str
    attention: str
    mlp: str
    up: str
    down: str
    cross_out: str = ""
    cross_attention: str = ""
    mid: str = ""
    ln1: str = ""
    ln2: str = ""


FAMILIES = {
    "bert": Family(out="attention.output.dense", attention="attention.self",
                   mlp="output.dense", up="intermediate.dense", down="output.dense",
                   mid="attention.output"),
    "distilbert": Family(out="attention.out_lin", attention="attention", mlp="ffn",
                         up="ffn.lin1", down="ffn.lin2", mid="sa_layer_norm"),
    "llama": Family(out="self_attn.o_proj", attention="self_attn", mlp="mlp",
                    up="mlp.gate_proj", down="mlp.down_proj", ln1="input_layernorm",
                    ln2="post_attention_layernorm"),
    "gpt2": Family(out="attn.c_proj", attention="attn", mlp="mlp", up="mlp.c_fc",
                   down="mlp.c_proj", ln1="ln_1", ln2="ln_2"),
    "t5": Family(out="layer.0.SelfAttention.o", attention="layer.0.SelfAttention",
                 mlp="layer.-1.DenseReluDense", up="layer.-1.DenseReluDense.wi",
                 down="layer.-1.DenseReluDense.wo", cross_out="layer.1.EncDecAttention.o",
                 cross_attention="layer.1.EncDecAttention",
                 ln1="layer.0.layer_norm", ln2="layer.-1.layer_norm"),
    "bart": Family(out="self_attn.out_proj", attention="self_attn", mlp="fc2", up="fc1",
                   down="fc2", cross_out="encoder_attn.out_proj", cross_attention="encoder_attn",
                   mid="self_attn_layer_norm"),
    "mbart": Family(out="self_attn.out_proj", attention="self_attn", mlp="fc2", up="fc1",
                    down="fc2", cross_out="encoder_attn.out_proj", cross_attention="encoder_attn",
                    ln1="self_attn_layer_norm", ln2="final_layer_norm"),
    "scratch": Family(out="attention.output", attention="attention", mlp="feed_forward",
                      up="feed_forward.expand", down="feed_forward.contract",
                      mid="attention_norm", ln1="attention_norm", ln2="feed_forward_norm"),
    "scratch-decoder": Family(out="self_attention.output", attention="self_attention",
                              mlp="feed_forward", up="feed_forward.expand",
                              down="feed_forward.contract", cross_out="cross_attention.output",
                              cross_attention="cross_attention", mid="self_attention_norm",
                              ln1="self_attention_norm",
                              ln2="feed_forward_norm"),
}


@dataclass
class Case:
    """A model with hook points and how to check it.

    stacks: (stack name, layer list of the model the reference runs on, family key) per stack;
        the layer lists are the twin's for a Hugging Face model, the model's own otherwise.
    reference: the model hand-written hooks go on and whose own outputs are the reference (the
        eager twin, or the from-scratch model itself, which has no hooks to bypass).
    pre_norm: each sublayer reads a norm of the stream and adds to it (x + f(norm(x))).
    output: the tensor a forward ends with (logits, or the last hidden state without a head;
        an encoder-decoder's encoder output and logits).
    """

    name: str
    model: nn.Module
    reference: nn.Module
    inputs: dict
    stacks: tuple[tuple[str, nn.ModuleList, str], ...]
    pre_norm: bool
    output: Callable[[object], torch.Tensor]
    hugging_face: bool = True
    has_logits: bool = True
    donor_inputs: dict = field(default_factory=dict)  # same shapes, other tokens

    def layers(self, stack: str = "") -> nn.ModuleList:
        return next(layers for name, layers, _ in self.stacks if name == stack)

    def family(self, stack: str = "") -> Family:
        return FAMILIES[next(family for name, _, family in self.stacks if name == stack)]

    def num_layers(self, stack: str = "") -> int:
        return len(self.layers(stack))

    @property
    def first_stack(self) -> str:
        return self.stacks[0][0]


def submodule(root: nn.Module, path: str) -> nn.Module:
    module = root
    for part in path.split("."):
        module = module[int(part)] if part.lstrip("-").isdigit() else getattr(module, part)
    return module


def _ids(vocab: int, seed: int, batch: int = 2, tokens: int = TOKENS, low: int = 5):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(low, vocab, (batch, tokens), generator=generator)  # (B, T)


def _padded(tokens: int = TOKENS) -> torch.Tensor:
    """(2, T): the second item ends in two padding positions."""
    mask = torch.ones(2, tokens, dtype=torch.long)
    mask[1, -2:] = 0
    return mask


def _logits(output) -> torch.Tensor:
    return output.logits


def _last_hidden(output) -> torch.Tensor:
    return output.last_hidden_state


def _both_stacks(output) -> torch.Tensor:
    """An encoder-decoder's encoder output and logits, flattened side by side: an edit in the
    encoder shows in the first even where a tiny random decoder barely passes it on."""
    memory = getattr(output, "encoder_last_hidden_state", None)
    if memory is None:
        memory = output.memory  # the from-scratch encoder-decoder's
    return torch.cat([memory.flatten(), output.logits.flatten()])


def _eager(model_class, folder: Path) -> nn.Module:
    """The same weights with transformers' plain eager attention and no hook points."""
    return model_class.from_pretrained(folder, attn_implementation="eager",
                                       dtype=torch.float32).eval()


def scratch_encoder(norm_style: str) -> Case:
    config = EncoderConfig(vocab_size=60, max_positions=32, hidden_size=32, num_heads=4,
                           num_layers=3, intermediate_size=64, norm_style=norm_style)
    model = random_encoder(config, SEED + 1)
    segments = torch.zeros(2, TOKENS, dtype=torch.long)
    segments[:, 4:] = 1

    def inputs(seed):
        return dict(input_ids=_ids(60, seed), token_type_ids=segments,
                    attention_mask=_padded())

    return Case(f"scratch-{norm_style}", model, model, inputs(1),
                (("", model.layers, "scratch"),), norm_style == "pre", _last_hidden,
                hugging_face=False, has_logits=False, donor_inputs=inputs(2))


def minilm(default_model) -> Case:
    twin = _eager(AutoModel, default_model_path())
    vocab = twin.config.vocab_size

    def inputs(seed):
        return dict(input_ids=_ids(vocab, seed, low=1000), attention_mask=_padded(),
                    token_type_ids=torch.zeros(2, TOKENS, dtype=torch.long))

    return Case("minilm", default_model.model, twin, inputs(1),
                (("", twin.encoder.layer, "bert"),), False, _last_hidden, has_logits=False,
                donor_inputs=inputs(2))


def smollm2(smollm2_model) -> Case:
    twin = _eager(AutoModelForCausalLM, converted_folder())

    def inputs(seed):
        return dict(input_ids=_ids(twin.config.vocab_size, seed, low=100), use_cache=False)

    return Case("smollm2", smollm2_model.model, twin, inputs(1),
                (("", twin.model.layers, "llama"),), True, _logits, donor_inputs=inputs(2))


def tiny_gpt2(folder: Path) -> Case:
    loaded = tiny_models.tiny_bpe_gpt2(folder)
    twin = _eager(AutoModelForCausalLM, folder)

    def inputs(seed):
        return dict(input_ids=_ids(twin.config.vocab_size, seed), use_cache=False)

    return Case("gpt2", loaded.model, twin, inputs(1), (("", twin.transformer.h, "gpt2"),),
                True, _logits, donor_inputs=inputs(2))


def _word_tokenizer(vocab: int) -> BertTokenizerFast:
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words += [f"w{i}" for i in range(vocab - len(words))]
    return BertTokenizerFast(vocab={word: i for i, word in enumerate(words)}, do_lower_case=True)


def tiny_bert_masked_lm(folder: Path) -> Case:
    tiny_models.tiny_masked_lm(folder)
    loaded = load_pretrained(str(folder))
    twin = _eager(AutoModelForMaskedLM, folder)
    vocab = twin.config.vocab_size

    def inputs(seed):
        return dict(input_ids=_ids(vocab, seed), attention_mask=_padded(),
                    token_type_ids=torch.zeros(2, TOKENS, dtype=torch.long))

    return Case("bert-mlm", loaded.lm_model, twin, inputs(1),
                (("", twin.bert.encoder.layer, "bert"),), False, _logits,
                donor_inputs=inputs(2))


def tiny_distilbert(folder: Path) -> Case:
    torch.manual_seed(SEED)
    tokenizer = _word_tokenizer(48)
    DistilBertForMaskedLM(DistilBertConfig(vocab_size=48, dim=32, n_heads=4, n_layers=3,
                                           hidden_dim=64, max_position_embeddings=64)
                          ).save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    loaded = load_pretrained(str(folder))
    twin = _eager(AutoModelForMaskedLM, folder)

    def inputs(seed):
        return dict(input_ids=_ids(48, seed), attention_mask=_padded())

    return Case("distilbert", loaded.lm_model, twin, inputs(1),
                (("", twin.distilbert.transformer.layer, "distilbert"),), False, _logits,
                donor_inputs=inputs(2))


def _mbart(folder: Path) -> Path:
    """A tiny random mBART: BART's modules, run pre-norm, with a final norm on each stack."""
    torch.manual_seed(SEED)
    MBartForConditionalGeneration(MBartConfig(
        vocab_size=len(SPECIALS) + len(WORDS), d_model=16, max_position_embeddings=64,
        encoder_layers=2, decoder_layers=3, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=32, decoder_ffn_dim=32, pad_token_id=0, eos_token_id=1, bos_token_id=3,
        decoder_start_token_id=1, forced_eos_token_id=None)).save_pretrained(
        folder, safe_serialization=True)
    save_tokenizer(folder)
    return folder


def tiny_seq2seq(kind: str, folder: Path) -> Case:
    built = _mbart(folder) if kind == "mbart" else build_seq2seq(kind, folder)
    loaded = load_seq2seq(str(built))
    twin = _eager(AutoModelForSeq2SeqLM, folder)
    vocab = twin.config.vocab_size
    family = {"t5": "t5", "mbart": "mbart"}.get(kind, "bart")
    source_mask = _padded()

    def inputs(seed):
        return dict(input_ids=_ids(vocab, seed), attention_mask=source_mask,
                    decoder_input_ids=_ids(vocab, seed + 10, tokens=TARGETS), use_cache=False)

    if kind == "t5":
        stacks = (("encoder", twin.encoder.block, family), ("decoder", twin.decoder.block,
                                                           family))
    else:
        stacks = (("encoder", twin.model.encoder.layers, family),
                  ("decoder", twin.model.decoder.layers, family))
    return Case(kind, loaded.model, twin, inputs(1), stacks, kind in ("t5", "mbart"), _both_stacks,
                donor_inputs=inputs(2))


def scratch_seq2seq(norm_style: str) -> Case:
    config = Seq2SeqConfig(source_vocab_size=40, target_vocab_size=30, max_positions=32,
                           hidden_size=32, num_heads=4, num_encoder_layers=2,
                           num_decoder_layers=3, intermediate_size=64, norm_style=norm_style)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED + 2)
        model = Seq2SeqModel(config).eval()
    source_real = _padded().bool()

    def inputs(seed):
        return dict(source_ids=_ids(40, seed), target_ids=_ids(30, seed + 10, tokens=TARGETS),
                    source_real=source_real)

    stacks = (("encoder", model.body.encoder_layers, "scratch"),
              ("decoder", model.body.decoder_layers, "scratch-decoder"))
    return Case(f"scratch-seq2seq-{norm_style}", model, model, inputs(1), stacks,
                norm_style == "pre", _both_stacks, hugging_face=False, donor_inputs=inputs(2))


ENCODER_DECODERS = ("t5", "bart", "marian", "mbart", "scratch-seq2seq-pre",
                    "scratch-seq2seq-post")
KINDS = ("scratch-pre", "scratch-post", "minilm", "smollm2", "gpt2", "bert-mlm",
         "distilbert") + ENCODER_DECODERS


def build_case(kind: str, request, folder: Path) -> Case:
    if kind.startswith("scratch-seq2seq-"):
        return scratch_seq2seq(kind.rsplit("-", 1)[1])
    if kind.startswith("scratch-"):
        return scratch_encoder(kind.split("-")[1])
    if kind == "minilm":
        return minilm(request.getfixturevalue("default_model"))
    if kind == "smollm2":
        return smollm2(request.getfixturevalue("smollm2_model"))
    if kind == "gpt2":
        return tiny_gpt2(folder)
    if kind == "bert-mlm":
        return tiny_bert_masked_lm(folder)
    if kind == "distilbert":
        return tiny_distilbert(folder)
    return tiny_seq2seq(kind, folder)

