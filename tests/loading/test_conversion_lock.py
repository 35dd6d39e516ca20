"""The SmolLM2 conversion cache under load: converted once when many ask, checked by content.

A tiny GPT-2 built here stands in for the converted SmolLM2 (`_convert_gguf` is replaced by a
fast copy of it): only the cache's locking and checksums are tested; tests/loading/test_decoder.py
converts the real model.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

from models.loading import conversion
from models.loading.conversion import converted_folder
from models.loading.conversion_cache import MANIFEST, WAITING_MESSAGE, is_complete
from models.loading.decoder import load_decoder

WORDS = ["time", "flies", "like", "an", "arrow", "."]
CONVERT_SECONDS = 1.0
CORRUPTED_BYTES = 4 * 2**20
OTHER_SESSION = "Another session is preparing SmolLM2: "


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    """A GPT-2 of ~12 MB (a 4096-position table makes room for 4 MB of corruption)."""
    vocab = {word: i for i, word in enumerate(["<unk>"] + WORDS)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>")
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(vocab), n_positions=4096, n_embd=256, n_layer=2, n_head=4)
    folder = tmp_path_factory.mktemp("tiny-converted")
    GPT2LMHeadModel(config).save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture
def fake_conversion(monkeypatch, tiny_folder):
    """Replace the ~20 s dequantisation by a 1 s copy of the tiny GPT-2; returns the calls."""
    calls = []

    def convert(gguf_path, target, report):
        calls.append(threading.get_ident())
        report(0.3, "step A")
        time.sleep(CONVERT_SECONDS / 2)
        report(0.6, "step B")
        time.sleep(CONVERT_SECONDS / 2)
        shutil.copytree(tiny_folder, target, dirs_exist_ok=True)

    monkeypatch.setattr(conversion, "_convert_gguf", convert)
    return calls


@pytest.fixture
def cache_dir(tmp_path):
    return tmp_path / "cache"


def _load_in_threads(cache_dir: Path, count: int):
    barrier = threading.Barrier(count)
    results: list = [None] * count
    events: list[list] = [[] for _ in range(count)]

    def session(index: int) -> None:
        barrier.wait()
        try:
            results[index] = load_decoder(progress=lambda f, m: events[index].append((f, m)),
                                          cache_dir=cache_dir)
        except BaseException as error:  # reported below, with the other sessions' outcome
            results[index] = error

    threads = [threading.Thread(target=session, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results, events


def test_sessions_asking_at_once_convert_once_and_waiters_see_its_progress(fake_conversion,
                                                                         cache_dir):
    results, events = _load_in_threads(cache_dir, 3)
    assert len(fake_conversion) == 1
    assert all(r is not None and not isinstance(r, BaseException) for r in results), results
    assert {r.model_type for r in results} == {"gpt2"}
    first = results[0].model.state_dict()
    assert all(torch.equal(first[k], r.model.state_dict()[k]) for r in results[1:] for k in first)
    converter = [e for e in events if ("step A" in [m for _, m in e])]
    waiters = [e for e in events if e not in converter]
    assert len(converter) == 1 and len(waiters) == 2
    for waited in waiters:
        messages = [m for _, m in waited]
        assert f"{OTHER_SESSION}step B" in messages or WAITING_MESSAGE in messages, messages
        assert waited[-1][0] == 1.0
    assert any(f"{OTHER_SESSION}step B" in [m for _, m in e] for e in waiters)
    folder = converted_folder(cache_dir)
    assert is_complete(folder)
    assert [p.name for p in cache_dir.iterdir()] == [folder.name]  # no lock or progress file left


def test_a_conversion_by_another_process_is_waited_for_not_repeated(fake_conversion, cache_dir,
                                                                    tmp_path):
    ready = tmp_path / "ready"
    load_decoder(cache_dir=ready)  # a complete cache the other process will move into place
    finished = converted_folder(ready)
    assert len(fake_conversion) == 1
    folder = converted_folder(cache_dir)
    cache_dir.mkdir()
    other = f"""
import fcntl, json, os, shutil, sys, time
lock = os.open({str(cache_dir / f'.{folder.name}.lock')!r}, os.O_RDWR | os.O_CREAT)
fcntl.flock(lock, fcntl.LOCK_EX)
progress = {str(cache_dir / f'.{folder.name}.progress')!r}
with open(progress, "w") as handle:
    json.dump({{"fraction": 0.4, "message": "Dequantising elsewhere"}}, handle)
print("locked", flush=True)
time.sleep(1.5)
shutil.copytree({str(finished)!r}, {str(folder)!r})
os.unlink(progress)
os.unlink({str(cache_dir / f'.{folder.name}.lock')!r})
os.close(lock)
"""
    child = subprocess.Popen([sys.executable, "-c", other], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "locked"
        events = []
        start = time.perf_counter()
        loaded = load_decoder(progress=lambda f, m: events.append((f, m)), cache_dir=cache_dir)
        waited = time.perf_counter() - start
    finally:
        child.wait(timeout=30)
    assert child.returncode == 0
    assert len(fake_conversion) == 1  # this process did not convert again
    assert loaded.model_type == "gpt2" and waited > 0.5
    assert (0.4, f"{OTHER_SESSION}Dequantising elsewhere") in events


def test_random_bytes_in_the_weights_are_caught_and_reconverted_with_progress(fake_conversion,
                                                                             cache_dir,
                                                                             tiny_folder):
    load_decoder(cache_dir=cache_dir)
    folder = converted_folder(cache_dir)
    weights = folder / "model.safetensors"
    size = weights.stat().st_size
    assert size > 2 * CORRUPTED_BYTES
    with open(weights, "r+b") as handle:  # same size, header intact: only a checksum can tell
        handle.seek(size // 2 - CORRUPTED_BYTES // 2)
        handle.write(np.random.default_rng(0).bytes(CORRUPTED_BYTES))
    assert weights.stat().st_size == size
    assert not is_complete(folder)
    events = []
    loaded = load_decoder(progress=lambda f, m: events.append((f, m)), cache_dir=cache_dir)
    assert len(fake_conversion) == 2 and is_complete(folder)
    assert (0.3, "step A") in events and events[-1][0] == 1.0  # the progress bar is fed
    reference = GPT2LMHeadModel.from_pretrained(tiny_folder).state_dict()
    assert all(torch.equal(v, reference[k]) for k, v in loaded.model.state_dict().items())


def test_a_cache_whose_checksums_match_but_does_not_load_is_converted_again(fake_conversion,
                                                                           cache_dir):
    load_decoder(cache_dir=cache_dir)
    folder = converted_folder(cache_dir)
    (folder / "config.json").write_text('{"model_type": "gpt2", "n_layer": "x"}')
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["files"]["config.json"] = {"size": (folder / "config.json").stat().st_size,
                                        "sha256": conversion.file_sha256(folder / "config.json")}
    (folder / MANIFEST).write_text(json.dumps(manifest))
    assert is_complete(folder)  # complete-looking: the contents are as recorded, but unreadable
    events = []
    loaded = load_decoder(progress=lambda f, m: events.append((f, m)), cache_dir=cache_dir)
    assert len(fake_conversion) == 2 and loaded.model_type == "gpt2"
    assert (0.6, "step B") in events


def test_an_unchanged_cache_is_hashed_once_per_process(fake_conversion, cache_dir, monkeypatch):
    load_decoder(cache_dir=cache_dir)
    folder = converted_folder(cache_dir)
    assert is_complete(folder)
    hashed = []
    real_sha256 = conversion.hashlib.sha256

    def counting():
        hashed.append(1)
        return real_sha256()

    monkeypatch.setattr(conversion.hashlib, "sha256", counting)
    assert is_complete(folder) and hashed == []
    os.utime(folder / "config.json")  # touched: hashed again (and still matching)
    assert is_complete(folder) and len(hashed) == 1


def test_written_safetensors_reload_equal_and_hash_as_the_file(tmp_path):
    from safetensors.torch import load_file

    tensors = {"b": torch.arange(6, dtype=torch.float32).reshape(2, 3), "a": torch.ones(5),
               "scalar": torch.tensor(2.5)}
    path = tmp_path / "model.safetensors"
    digest = conversion.write_safetensors(tensors, path, {"format": "pt"})
    assert digest == conversion.hashlib.sha256(path.read_bytes()).hexdigest()
    loaded = load_file(str(path))
    assert loaded.keys() == tensors.keys()
    assert all(torch.equal(loaded[k], tensors[k]) for k in tensors)
