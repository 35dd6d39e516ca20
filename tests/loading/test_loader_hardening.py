"""Issue 9's loader cases: every bad model is refused in one sentence, before anything is built.

Every model here is built in the test (tiny, random weights, saved with save_pretrained) and then
damaged the way a careless or hostile student could.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import threading
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (AutoConfig, AutoModel, BertConfig, BertForMaskedLM, BertModel,
                          PreTrainedTokenizerFast)

from models.loading.decoder import load_decoder
from models.errors import ModelLoadError
from models.limits import LOADED_MODELS, MODEL_BYTES
from models.store import stores
from models.store.byte_cache import Budget, Store
from models.store.keys import result_key
from models.loading.loader_checks import LOCAL_MODELS_ENV, reason
from models.loading.size_checks import model_size, skeleton
from models.loading.pretrained import DEFAULT_MODEL, load_pretrained, model_identity
from tests.reference import encoder_record
from ui import cache

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "time", "flies", "like", "an", "arrow", "."]
SENTENCE = "time flies like an arrow ."
RSS_GROWTH_BYTES = 100 * 2**20


def _tokenizer() -> PreTrainedTokenizerFast:
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]")


def _config(**changes) -> BertConfig:
    settings = dict(vocab_size=len(WORDS), hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=2, intermediate_size=64, max_position_embeddings=32)
    return BertConfig(**(settings | changes))


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-bert")
    torch.manual_seed(0)
    BertModel(_config()).save_pretrained(folder, safe_serialization=True)
    _tokenizer().save_pretrained(folder)
    return folder


@pytest.fixture
def copy(tiny_bert, tmp_path) -> Path:
    """A fresh copy of the tiny BERT to damage."""
    folder = tmp_path / "model"
    shutil.copytree(tiny_bert, folder)
    return folder


def _refused(name: str, match: str, loader=load_pretrained) -> str:
    with pytest.raises(ModelLoadError, match=match) as error:
        loader(name)
    message = str(error.value)
    assert message.endswith(".") and ". " not in message.replace("e.g. ", ""), message
    assert "Traceback" not in message and "\n" not in message
    return message


def test_the_tiny_bert_itself_loads_and_runs(tiny_bert):
    loaded = load_pretrained(str(tiny_bert))
    record = encoder_record(loaded, SENTENCE)
    reference = BertModel.from_pretrained(tiny_bert, attn_implementation="eager")
    ids = loaded.tokenizer(SENTENCE, return_tensors="pt")["input_ids"]
    assert record.tokens == tuple(SENTENCE.split())
    with torch.inference_mode():
        expected = torch.stack(reference(ids, output_attentions=True).attentions, 1)[0]
    torch.testing.assert_close(torch.from_numpy(record.weights.copy()), expected)


# Names.

@pytest.mark.parametrize("loader", [load_pretrained, load_decoder])
@pytest.mark.parametrize("name", ["a" * 300, "/tmp/" + "b" * 300, "x/" * 600])
def test_overlong_names_are_one_sentence(name, loader):
    _refused(name, "name", loader)


# Safetensors files.

def _damage_weights(folder: Path, how: str) -> None:
    path = folder / "model.safetensors"
    data = path.read_bytes()
    header_length = int.from_bytes(data[:8], "little")
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "header only":
        path.write_bytes(data[: 8 + header_length])
    elif how == "huge header":
        path.write_bytes((2**40).to_bytes(8, "little") + data[8:])
    elif how == "header not JSON":
        path.write_bytes(data[:8] + b"\x00" * header_length + data[8 + header_length:])
    elif how == "malformed entry":
        header = json.loads(data[8: 8 + header_length])
        first = next(k for k in header if k != "__metadata__")
        header[first]["shape"] = [10**6]
        raw = json.dumps(header).encode()
        raw += b" " * (-len(raw) % 8)
        path.write_bytes(len(raw).to_bytes(8, "little") + raw + data[8 + header_length:])
    elif how == "tiny file":
        path.write_bytes(b"\x01\x02")


@pytest.mark.parametrize("how, match", [
    ("truncated", "model.safetensors is cut short"),
    ("header only", "model.safetensors is cut short"),
    ("huge header", "its header claims 1,024.0 GB"),
    ("header not JSON", "its header is not JSON"),
    ("malformed entry", "is malformed"),
    ("tiny file", "too short to be a safetensors file"),
])
def test_damaged_safetensors_are_refused_before_loading(copy, how, match, monkeypatch):
    _damage_weights(copy, how)
    monkeypatch.setattr(BertModel, "from_pretrained", lambda *a, **k: pytest.fail("was loaded"))
    _refused(str(copy), match)
    _refused(str(copy), match, load_decoder)


# config.json.

@pytest.mark.parametrize("text, match", [
    ('{"model_type": "bert", "hidden_size": ', r"config.json is not valid JSON \(Expecting value "
                                                r"at line 1, column 39\)"),
    ("[1, 2, 3]", "config.json holds a JSON list, not an object of settings"),
    ('"bert"', "config.json holds a JSON string"),
])
def test_unreadable_config_names_the_real_problem(copy, text, match):
    (copy / "config.json").write_text(text)
    message = _refused(str(copy), match)
    assert "not a local folder" not in message


@pytest.mark.parametrize("key, value, match", [
    ("hidden_size", "big", "config.json's hidden_size must be a whole number, not \"big\""),
    ("num_hidden_layers", 2.5, "num_hidden_layers must be a whole number, not 2.5"),
    ("num_attention_heads", True, "num_attention_heads must be a whole number, not true"),
    ("vocab_size", -3, "vocab_size is -3, which no model can have"),
    ("intermediate_size", 0, "intermediate_size is 0"),
    ("max_position_embeddings", [512], "must be a whole number, not \\[512\\]"),
    ("model_type", 7, "model_type must be a name, not 7"),
])
def test_wrong_config_types_are_one_sentence(copy, key, value, match):
    config = json.loads((copy / "config.json").read_text())
    config[key] = value
    (copy / "config.json").write_text(json.dumps(config))
    _refused(str(copy), match)
    _refused(str(copy), match, load_decoder)


# Pickles never reach a loader.

class _RunsCodeWhenUnpickled:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


@pytest.mark.parametrize("target", ["pytorch_model.bin", "../elsewhere/model.safetensors",
                                    "missing.safetensors"])
def test_an_index_pointing_at_a_pickle_or_elsewhere_is_refused(copy, tmp_path, monkeypatch, target):
    marker = tmp_path / "unpickled"
    (copy / "pytorch_model.bin").write_bytes(pickle.dumps(_RunsCodeWhenUnpickled(marker)))
    keys = load_file(str(copy / "model.safetensors")).keys()
    (copy / "model.safetensors").unlink()
    index = {"metadata": {}, "weight_map": {key: target for key in keys}}
    (copy / "model.safetensors.index.json").write_text(json.dumps(index))
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load was called"))
    message = {"pytorch_model.bin": "points at 'pytorch_model.bin', which is not a safetensors "
                                    "file",
               "../elsewhere/model.safetensors": "outside the model's folder",
               "missing.safetensors": "'missing.safetensors' its index lists is missing"}[target]
    _refused(str(copy), message)
    _refused(str(copy), message, load_decoder)
    assert not marker.exists()


def test_sharded_safetensors_behind_an_index_still_load(copy):
    tensors = load_file(str(copy / "model.safetensors"))
    (copy / "model.safetensors").unlink()
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[::2],
              "model-00002-of-00002.safetensors": names[1::2]}
    for shard, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, str(copy / shard), metadata={"format": "pt"})
    weight_map = {k: shard for shard, keys in shards.items() for k in keys}
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    (copy / "model.safetensors.index.json").write_text(json.dumps(index))
    loaded = load_pretrained(str(copy))
    state = loaded.model.state_dict()
    assert all(torch.equal(state[k], v) for k, v in tensors.items())


# Weights that do not cover the model.

def test_empty_weights_are_refused(copy):
    save_file({}, str(copy / "model.safetensors"), metadata={"format": "pt"})
    _refused(str(copy), "its safetensors weights hold no tensors")


def test_partial_weights_are_refused_not_shown_as_pretrained(copy):
    tensors = load_file(str(copy / "model.safetensors"))
    kept = {k: v for k, v in tensors.items() if "layer.1." not in k}
    assert len(kept) < len(tensors)
    save_file(kept, str(copy / "model.safetensors"), metadata={"format": "pt"})
    _refused(str(copy), r"its weights do not cover the model \(its weight files hold [0-9,]+ "
                        r"numbers for [0-9,]+ parameters\)")


def test_a_checkpoint_without_a_pooler_still_loads(tmp_path):
    """roberta-base's checkpoint has no pooler: the pooler does not change the attention."""
    torch.manual_seed(1)
    BertForMaskedLM(_config()).save_pretrained(tmp_path, safe_serialization=True)
    _tokenizer().save_pretrained(tmp_path)
    loaded = load_pretrained(str(tmp_path))
    saved = load_file(str(tmp_path / "model.safetensors"))
    layer = "encoder.layer.1.attention.self.query.weight"
    assert torch.equal(loaded.model.state_dict()[layer], saved[f"bert.{layer}"])


# Models too big for the machine are refused before anything is allocated.

def _rss() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.parametrize("changes", [
    {"max_position_embeddings": 10_000_000},
    {"num_hidden_layers": 200, "hidden_size": 4096, "num_attention_heads": 32,
     "intermediate_size": 16384},
    {"vocab_size": 2_000_000_000},
])
@pytest.mark.parametrize("loader", [load_pretrained, load_decoder])
def test_huge_configs_are_refused_without_allocating(copy, changes, loader):
    config = json.loads((copy / "config.json").read_text()) | changes
    (copy / "config.json").write_text(json.dumps(config))
    before = _rss()
    message = _refused(str(copy), "parameters .* more than this server's limit of 1.0 GB per "
                                  "model", loader)
    assert _rss() - before < RSS_GROWTH_BYTES
    assert _counted(config) * 4 > MODEL_BYTES
    assert re.search(r"about [0-9.,]+ (million|billion) parameters", message)


def _counted(settings: dict) -> int:
    """Parameters of the model a config builds, counted on the meta device."""
    config = AutoConfig.for_model(**settings)
    return model_size(skeleton("counted", config, AutoModel)).parameters


def test_counts_are_the_real_parameter_count(default_model, tiny_bert):
    for model in (default_model.model, BertModel(_config())):
        actual = sum(p.numel() for p in model.parameters())
        assert _counted(model.config.to_dict()) == actual


# One model, however its folder is spelled: one identity and one load.

def test_path_spellings_give_one_identity_and_load_once(tiny_bert, tmp_path):
    outer = tmp_path / "a"
    (outer / "b").parent.mkdir()
    shutil.copytree(tiny_bert, outer / "b")
    (tmp_path / "link").symlink_to(outer / "b")
    spellings = [f"{outer}/b", f"{outer}//b", f"{outer}/./b", f"{outer}/b/.", f"{outer}/b/",
                 f"{tmp_path}/link", f"  {outer}/b  "]
    keys = {model_identity(name) for name in spellings}
    assert keys == {f"folder:{(outer / 'b').resolve()}"}
    assert model_identity("bert-base-uncased") == "hub:bert-base-uncased@main"
    assert model_identity(DEFAULT_MODEL) != model_identity(f"{outer}/b")
    registry = Store("loaded models", Budget(entries=2))
    loads = []

    def loader(name):
        loads.append(name)
        return load_pretrained(name)

    loaded = [registry.get(model_identity(n), lambda n=n: loader(n)) for n in spellings]
    assert len(loads) == 1 and all(m is loaded[0] for m in loaded)
    assert registry.keys() == (f"folder:{(outer / 'b').resolve()}",)


def test_the_registry_keeps_a_bounded_number_and_pins_the_defaults():
    registry = Store("loaded models", stores.MODELS.budget)
    registry.get("embedded:minilm", lambda: "minilm", pinned=True)
    for index in range(LOADED_MODELS + 3):
        registry.get(f"folder:/m{index}", lambda index=index: f"model {index}")
    registry.get("folder:/m3", lambda: pytest.fail("kept, not loaded again"))
    kept = registry.keys()
    assert len(kept) == LOADED_MODELS and kept[-1] == "folder:/m3"
    assert "embedded:minilm" in registry and registry.pinned() == ("embedded:minilm",)
    assert registry.evicted()[0] == "folder:/m0" and "folder:/m0" not in registry
    assert str(LOADED_MODELS) in cache.kept_models_notice()


def test_the_embedded_models_are_pinned_and_others_kept_by_identity(tiny_bert, monkeypatch):
    monkeypatch.setattr(stores, "MODELS", Store("loaded models", stores.MODELS.budget))
    embedded = cache.pretrained(DEFAULT_MODEL)
    assert stores.MODELS.pinned() == (result_key("encoder", model_identity(DEFAULT_MODEL)),)
    assert cache.pretrained(f" {DEFAULT_MODEL} ") is embedded
    cache.pretrained(str(tiny_bert))
    assert stores.MODELS.keys() == (result_key("encoder", model_identity(str(tiny_bert))),)


def test_the_same_key_asked_at_once_loads_once_and_a_failure_is_not_kept():
    registry = Store("loaded models", Budget(entries=2))
    calls, barrier = [], threading.Barrier(4)
    results = []

    def slow_load():
        calls.append(1)
        time.sleep(0.3)
        return object()

    def session():
        barrier.wait()
        results.append(registry.get("folder:/same", slow_load))

    threads = [threading.Thread(target=session) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert len(calls) == 1 and len(results) == 4 and all(r is results[0] for r in results)

    def failing():
        raise ModelLoadError("Could not load 'x': broken.")

    with pytest.raises(ModelLoadError):
        registry.get("folder:/bad", failing)
    assert "folder:/bad" not in registry
    assert registry.get("folder:/bad", lambda: "fixed") == "fixed"


# The server's setting for local folders.

def test_local_folders_turned_off(tiny_bert, monkeypatch):
    monkeypatch.setenv(LOCAL_MODELS_ENV, "off")
    for name in (str(tiny_bert), "/no/such/folder", "./relative"):
        message = _refused(name, "this server does not load models from its own folders")
        assert message.count("/") <= name.count("/")  # only what the user typed
    _refused(DEFAULT_MODEL.replace("MiniLM", "NoSuchModel"), "Hugging Face Hub is turned off")
    assert load_pretrained(DEFAULT_MODEL).model_type == "bert"  # built-in models still load


def test_local_folders_limited_to_an_allow_list(tiny_bert, tmp_path, monkeypatch):
    allowed, other = tmp_path / "allowed", tmp_path / "other"
    shutil.copytree(tiny_bert, allowed / "mine")
    shutil.copytree(tiny_bert, other / "theirs")
    (allowed / "escape").symlink_to(other / "theirs")
    monkeypatch.setenv(LOCAL_MODELS_ENV, f"{tmp_path / 'nowhere'}:{allowed}")
    assert load_pretrained(str(allowed / "mine")).model_type == "bert"
    assert load_pretrained(f"{allowed}/./mine/").model_type == "bert"
    outside = "it is not in a folder this server allows models to be loaded from"
    exists = _refused(str(other / "theirs"), outside)
    missing = _refused(str(other / "nothing-here"), outside)
    assert exists.replace("theirs", "X") == missing.replace("nothing-here", "X")  # no probing
    _refused(str(allowed / "escape"), outside)  # a link out of the allowed folder
    _refused(f"{allowed}/../other/theirs", outside)
    monkeypatch.setenv(LOCAL_MODELS_ENV, "any")
    assert load_pretrained(str(other / "theirs")).model_type == "bert"


def test_restricted_messages_hide_server_paths(monkeypatch, tmp_path):
    error = OSError(f"Unable to read {tmp_path}/secret/tokenizer.json from /srv/models/x")
    monkeypatch.setenv(LOCAL_MODELS_ENV, str(tmp_path))
    hidden = reason(error, "mine", tmp_path / "secret")
    assert str(tmp_path) not in hidden and "/srv" not in hidden and "mine" in hidden
    monkeypatch.setenv(LOCAL_MODELS_ENV, "any")
    assert "/srv/models/x" in reason(error, "mine", tmp_path / "secret")
