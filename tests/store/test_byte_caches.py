"""Every per-input cache of the pages going through the one store (tests/store/test_byte_store.py
tests the store itself): for each, one entry's measured size is within a sane factor of the arrays
it really holds, and filling its store beyond a small budget (a store swapped in for the named
one) drops the least recently used entries while the bytes held never pass the budget. Only the
cheapest inputs run: tiny models built here, MiniLM on a few words, small from-scratch encoders.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from tokenizers import ByteLevelBPETokenizer
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

from models import limits
from models.experiments import ablation
from models.experiments.classifier import pretrained_classifier
from models.experiments.finetune import PRETRAINED, default_settings, finetune
from models.experiments.generation import GenerationSettings
from models.experiments.labelled_data import load_shipped
from models.loading import kinds
from models.loading.hf_seq2seq import load_seq2seq, run_seq2seq
from models.loading.pretrained import DEFAULT_MODEL, LoadedModel
from models.loading.source import ModelSource
from models.store import stores
from models.store.byte_cache import Budget, Store, array_bytes
from models.teaching.trained_translator import cache_folder, is_cached, save
from tests.loading.test_hf_seq2seq import build
from ui import (analysis_cache, cache, finetune_cache, generation_cache, layer_walk_cache,
                seq2seq_cache, teaching_cache)


SLACK = 64 * 1024  # Python objects around the arrays (tokens, candidates, keys)


TEXT = "Time flies like an arrow."


END = "<|endoftext|>"


ENTRIES = 6  # distinct entries each case makes


# What the tiny encoder–decoder reads, teacher-forced (so every run has the same shapes).
TARGETS = ("la voiture rouge", "la voiture verte", "elle voit rouge", "elle voit les",
           "les livres verts", "la voiture est")


TARGET = 100  # a token id of the tiny decoder, as the next token


TOY_SENTENCES = ("the red car is fast", "the green car is slow", "the blue car is fast",
                 "the black dog is slow", "the white cat is fast", "the red ball is round")


@pytest.fixture(scope="module")
def tiny_decoder(tmp_path_factory) -> str:
    """A tiny GPT-2 with its own byte-level tokenizer, saved where the sidebar could load it."""
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator([TEXT, "Fruit flies like a banana."] * 4, vocab_size=300,
                            min_frequency=1, special_tokens=[END], show_progress=False)
    tokenizer = GPT2TokenizerFast(tokenizer_object=bpe._tokenizer, bos_token=END, eos_token=END,
                                  unk_token=END)
    end = tokenizer.convert_tokens_to_ids(END)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=64, n_embd=32, n_layer=2,
                        n_head=4, bos_token_id=end, eos_token_id=end)
    folder = tmp_path_factory.mktemp("tiny-decoder")
    GPT2LMHeadModel(config).save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def tiny_seq2seq(tmp_path_factory) -> str:
    return str(build("t5", tmp_path_factory.mktemp("t5")))


@pytest.fixture(scope="module")
def toy_on_disk():
    """The toy translator in its disk cache (trained once per machine, as the page does)."""
    if not is_cached(seq2seq_cache.TOY_SETTINGS):
        from tests.scratch.test_seq2seq import real_training

        save(real_training(), cache_folder(seq2seq_cache.TOY_SETTINGS))


@pytest.fixture(scope="module")
def tiny_result(default_model):
    """MiniLM fine-tuned for one step (before/after compares it with MiniLM itself)."""
    settings = default_settings(PRETRAINED, 1)
    classifier = pretrained_classifier(default_model.model, 2, settings.pooling, settings.seed)
    return finetune(classifier, default_model.tokenizer, load_shipped(), settings, max_steps=1)


def record_bytes(*records) -> int:
    return sum(r.weights.nbytes for r in records if r is not None)


def walk_bytes(walk) -> int:
    return (sum(s.value.nbytes for s in walk.steps)
            + sum(m.matrix.nbytes for m in walk.matrices))


@dataclass(frozen=True)
class Case:
    """`call(models, i)` makes entry i (entries of one case have the same shapes); `real(value)`
    is what its arrays hold; `store` names the store of models.store.stores it lands in."""

    name: str
    store: str
    call: Callable[[dict, int], Any]
    real: Callable[[Any], int]


def decoder(models: dict) -> ModelSource:
    return ModelSource(kinds.DECODER, models["decoder"])


ANALYSES, RESULTS, ENCODERS = "ANALYSES", "RESULTS", "WALK_ENCODERS"


MINILM = ModelSource(kinds.PRETRAINED, DEFAULT_MODEL)


WORDS = ("time", "fruit", "arrow", "banana", "flies", "like")


CASES = [
    Case("baseline", ANALYSES,
         lambda m, i: analysis_cache.baseline(decoder(m), f"{WORDS[i]} flies like an", "", None),
         lambda v: record_bytes(v.record)),
    Case("head_ablation", ANALYSES,
         lambda m, i: analysis_cache.head_ablation(
             decoder(m), TEXT, "", None, TARGET, ((0, i % 4),),
             ablation.ZERO if i < 4 else ablation.MEAN),
         lambda v: record_bytes(v.before.record, v.after.record)),
    Case("importance", ANALYSES,
         lambda m, i: analysis_cache.importance(decoder(m), f"{WORDS[i]} flies like an", "", None,
                                                TARGET, ablation.ZERO),
         lambda v: v.nbytes),
    Case("knockout", ANALYSES,
         lambda m, i: analysis_cache.knockout(decoder(m), TEXT, "", None, TARGET, 3, (i % 3,),
                                              (0,) if i < 3 else (1,)),
         lambda v: record_bytes(v.before.record, v.after.record)),
    Case("repeated_tokens", ANALYSES,
         lambda m, i: analysis_cache.repeated_tokens(decoder(m), 8, i),
         lambda v: record_bytes(v)),
    Case("teaching batch", RESULTS,
         lambda m, i: teaching_cache.batch(DEFAULT_MODEL, 0, False, f"{WORDS[i]} flies",
                                           "a cat sat here"),
         lambda v: record_bytes(*v.masked, *v.unmasked)),
    Case("dot_products_at", RESULTS,
         lambda m, i: teaching_cache.dot_products_at(16, i),
         lambda v: v.dimensions.nbytes + v.mean_abs.nbytes + v.approximation.nbytes),
    Case("row", RESULTS,
         lambda m, i: teaching_cache.row(64, 256, i),
         lambda v: sum(a.nbytes for a in (v.unscaled_scores, v.scaled_scores,
                                          v.unscaled_weights, v.scaled_weights))),
    Case("entropies", RESULTS,
         lambda m, i: teaching_cache.entropies(4, i),
         lambda v: v.dimensions.nbytes + v.unscaled.nbytes + v.scaled.nbytes),
    Case("sinusoid", RESULTS,
         lambda m, i: teaching_cache.sinusoid(64 + i, 64),
         lambda v: v.nbytes),
    Case("sinusoid_similarity", RESULTS,
         lambda m, i: teaching_cache.sinusoid_similarity(64 + i, 64),
         lambda v: v.nbytes),
    Case("learned_similarity", RESULTS,
         lambda m, i: teaching_cache.learned_similarity(DEFAULT_MODEL, 64 + i),
         lambda v: v.nbytes),
    Case("rotary", RESULTS,
         lambda m, i: teaching_cache.rotary(m["decoder"], 64 + i),
         lambda v: 0 if v is None else v.nbytes),  # GPT-2 has no rotary module: None, kept small
    Case("toy_translation", RESULTS,
         lambda m, i: seq2seq_cache.toy_translation(TOY_SENTENCES[i]),
         lambda v: record_bytes(v.encoder, v.decoder, v.cross)),
    Case("hf_run", RESULTS,
         lambda m, i: seq2seq_cache.hf_run(m["seq2seq"], "the red car is fast .", TARGETS[i], 3),
         lambda v: record_bytes(v.encoder, v.decoder, v.cross)),
    Case("seq2seq bertviz", RESULTS,
         lambda m, i: seq2seq_cache.bertviz_html(*m["runs"][i], "head"),
         lambda v: len(v)),
    Case("before_after", RESULTS,
         lambda m, i: finetune_cache.before_after("key", DEFAULT_MODEL, f"{WORDS[i]} was good",
                                                  m["result"]),
         lambda v: record_bytes(v.before_record, v.after_record)),
    Case("generation", RESULTS,
         lambda m, i: generation_cache.generation(
             m["decoder"], TEXT, GenerationSettings(new_tokens=3, greedy=False, seed=i)),
         lambda v: v.nbytes),
    Case("pretrained_walk", RESULTS,
         lambda m, i: layer_walk_cache.pretrained_walk(DEFAULT_MODEL, f"{WORDS[i]} flies", i % 6),
         walk_bytes),
    Case("scratch_walk", RESULTS,
         lambda m, i: layer_walk_cache.scratch_walk(DEFAULT_MODEL, (32, 4, 1, "pre"), 0, 2, 8,
                                                    f"{WORDS[i]} flies", 0),
         walk_bytes),
    Case("walk encoder", ENCODERS,
         lambda m, i: layer_walk_cache.scratch_encoder(500, 32, 4, 1, "pre", i),
         lambda v: sum(t.nbytes for t in (*v.parameters(), *v.buffers()))),
]


@pytest.fixture(scope="module")
def models(default_model, tiny_decoder, tiny_seq2seq, tiny_result, toy_on_disk) -> dict:
    loaded = load_seq2seq(tiny_seq2seq)  # runs made here, outside the stores the cases watch
    runs = [run_seq2seq(loaded, "the red car is fast .", target, 3) for target in TARGETS]
    return {"decoder": tiny_decoder, "seq2seq": tiny_seq2seq, "result": tiny_result,
            "runs": [(r.encoder, r.decoder, r.cross) for r in runs]}


class CountingStore(Store):
    """A Store that counts its computations (a miss computes; a hit does not)."""

    def __init__(self, budget_bytes: int):
        super().__init__("counting", Budget(bytes=budget_bytes))
        self.computed = 0
        self.largest_total = 0

    def get(self, key, compute, pinned=False):
        def counted():
            self.computed += 1
            return compute()
        return super().get(key, counted, pinned)

    def put(self, key, value, pinned=False) -> None:
        super().put(key, value, pinned)
        self.largest_total = max(self.largest_total, self.total_bytes)


def use_store(monkeypatch, case: Case, budget: int) -> CountingStore:
    """A counting store in place of the named one (every cache reads `stores.NAME` when used)."""
    store = CountingStore(budget)
    monkeypatch.setattr(stores, case.store, store)
    return store


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_an_entry_reports_the_bytes_its_arrays_hold(case, models, monkeypatch):
    store = use_store(monkeypatch, case, limits.GIB)
    value = case.call(models, 0)
    assert len(store) == 1 and store.computed == 1
    real = case.real(value)
    assert real <= store.total_bytes <= 2 * real + SLACK, (real, store.total_bytes)
    assert case.call(models, 0) is value and store.computed == 1  # computed once


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_filling_a_store_drops_the_least_recently_used_within_its_budget(case, models,
                                                                           monkeypatch):
    sizes = []
    for i in range(ENTRIES):
        probe = use_store(monkeypatch, case, limits.GIB)
        case.call(models, i)
        sizes.append(probe.total_bytes)
    assert 2 * max(sizes) < 3 * min(sizes), sizes  # the entries are alike: two fit, three do not
    budget = (2 * max(sizes) + 3 * min(sizes)) // 2
    store = use_store(monkeypatch, case, budget)

    def computes(i: int) -> bool:
        before = store.computed
        case.call(models, i)
        assert store.total_bytes <= budget
        return store.computed > before

    assert computes(0) and computes(1)
    assert not computes(0)  # a hit, and now the most recently used
    assert computes(2)  # drops 1, the least recently used
    assert not computes(0) and not computes(2)
    assert computes(1)  # it had been dropped
    for i in range(3, ENTRIES):
        assert computes(i)
    assert len(store) == 2 and store.largest_total <= budget


@dataclass(frozen=True)
class FakeResult:
    classifier: nn.Module


def fake_result(size: int) -> FakeResult:
    return FakeResult(nn.Linear(size, size, bias=False))


def trained_models(budget: Budget) -> finetune_cache.TrainedModels:
    return finetune_cache.TrainedModels(Store("fine-tuned", budget))


def test_the_declared_finetune_store_keeps_the_newest_within_its_limits():
    assert stores.FINETUNED.budget == Budget(bytes=limits.FINETUNED_BYTES,
                                             entries=limits.FINETUNED_MODELS, keep_newest=True)
    assert finetune_cache.store().results is stores.FINETUNED


def test_fine_tuned_models_are_bounded_in_bytes_least_recent_out():
    one = array_bytes(("a", fake_result(100)))  # about 40 KB of weights
    store = trained_models(Budget(bytes=int(2.5 * one), entries=10, keep_newest=True))
    for key in "abc":
        store.put(key, fake_result(100))
        assert store.results.total_bytes <= store.results.budget.bytes
    assert store.get("a") is None and len(store.results) == 2
    assert store.get("b") is not None  # now the most recently used
    store.put("d", fake_result(100))
    assert store.get("c") is None and store.get("b") is not None and store.get("d") is not None
    store.put("big", fake_result(400))  # alone over the budget: the newest stays, alone
    assert [key for key, _ in store.recent()] == ["big"]


def test_the_finetune_store_reports_a_real_classifier_size(tiny_result):
    store = trained_models(Budget(bytes=limits.GIB, entries=2, keep_newest=True))
    store.put("key", tiny_result)
    real = sum(p.nbytes for p in tiny_result.classifier.parameters())
    assert real <= store.results.total_bytes <= 2 * real + SLACK


def test_encoder_decoders_are_kept_by_what_they_are_and_bounded(monkeypatch, tmp_path):
    loads = []

    def load(name: str):
        loads.append(name)
        return LoadedModel(name=name, model=nn.Linear(2, 2), tokenizer=None, max_tokens=8)

    monkeypatch.setattr(cache, "load_seq2seq", load)
    monkeypatch.setattr(stores, "SEQ2SEQ_MODELS", Store("test", stores.SEQ2SEQ_MODELS.budget))
    others = [tmp_path / f"other{i}" for i in range(limits.SEQ2SEQ_MODELS)]
    for folder in (tmp_path / "a", *others):
        folder.mkdir()
    first = seq2seq_cache.hf_model(str(tmp_path / "a"))  # through the seq2seq kind
    assert first.source == ModelSource(kinds.SEQ2SEQ, str(tmp_path / "a"))
    assert seq2seq_cache.hf_model(f"{tmp_path}//a/.").model is first.model and len(loads) == 1
    for folder in others:
        seq2seq_cache.hf_model(str(folder))
    seq2seq_cache.hf_model(str(tmp_path / "a"))
    assert len(loads) == 2 + len(others)  # the others pushed it out, and it was loaded again


def test_two_sessions_asking_for_one_result_compute_it_once(monkeypatch):
    store = use_store(monkeypatch, CASES[[c.name for c in CASES].index("row")], limits.GIB)
    results = []
    threads = [threading.Thread(target=lambda: results.append(teaching_cache.row(32, 64, 7)))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert store.computed == 1 and all(r is results[0] for r in results)


def test_a_copied_from_scratch_encoder_is_kept_once_whatever_the_seed():
    """The seed only shapes random weights: copies of one model under eight seeds are one copy."""
    copies = {id(cache.loaded(ModelSource(kinds.SCRATCH_COPIED, DEFAULT_MODEL, seed)).model)
              for seed in range(8)}
    assert len(copies) == 1
    randoms = {id(cache.loaded(ModelSource(kinds.SCRATCH_RANDOM, DEFAULT_MODEL, seed)).model)
               for seed in (1, 2)}
    assert len(randoms) == 2
