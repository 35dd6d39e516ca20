"""AppTest of the head finder, head detectors and ablation pages, asserting on the values shown.

The real MiniLM is the encoder; a tiny GPT-2 saved in a temporary folder stands in for the
causal decoder (the single-head grid of SmolLM2 takes ~20 s, see bench/bench_ablation.py).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tokenizers import ByteLevelBPETokenizer
from transformers import BertForMaskedLM, GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

from models.experiments import ablation, targets
from models.hooks.install import install
from models.experiments.classifier import scratch_classifier, scratch_encoder_config
from models.experiments.finetune import SCRATCH, default_settings, finetune
from models.experiments.labelled_data import load_shipped
from models.analysis.detectors import induction_scores, previous_token_scores
from models.analysis.head_finder import locate, query_to_keys
from models.loading.pretrained import DEFAULT_MODEL, default_model_path
from models.loading.kinds import DECODER, PRETRAINED
from models.loading.source import ModelSource
from tests.app_support import array, figures, run_page, texts
from ui import cache, finetune_cache
from ui.text import plain
from models.analysis.token_options import merge_word_pieces

MARIO = "Mario is short, but he can jump super high."
END = "<|endoftext|>"


def z_of(at, title: str) -> np.ndarray:
    matches = [f for f in figures(at) if title in f["layout"]["title"]["text"]]
    assert len(matches) == 1, [f["layout"]["title"]["text"] for f in figures(at)]
    return array(matches[0]["data"][0]["z"])


def minilm_record(text: str):
    return cache.record(ModelSource(PRETRAINED, DEFAULT_MODEL), text, "")


@pytest.fixture(scope="module")
def tiny_decoder(tmp_path_factory) -> str:
    """A tiny GPT-2 with its own byte-level tokenizer, saved where the sidebar can load it."""
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(["Time flies like an arrow.", "Fruit flies like a banana.", MARIO] * 4,
                            vocab_size=300, min_frequency=1, special_tokens=[END],
                            show_progress=False)
    tokenizer = GPT2TokenizerFast(tokenizer_object=bpe._tokenizer, bos_token=END, eos_token=END,
                                  unk_token=END)
    end = tokenizer.convert_tokens_to_ids(END)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=64, n_embd=32, n_layer=2,
                        n_head=4, bos_token_id=end, eos_token_id=end, initializer_range=0.2)
    folder = tmp_path_factory.mktemp("tiny-decoder")
    GPT2LMHeadModel(config).save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return str(folder)


def decoder_state(folder: str, **extra) -> dict:
    return {"sb_kind": DECODER.value, "decoder_name": folder, **extra}


# Head finder

def test_head_finder_ranks_every_head_and_opens_the_best_on_the_maps_page():
    at = run_page("head_finder", text=MARIO, state={"finder_query": "he", "finder_keys": "Mario"})
    assert not at.error
    record = minilm_record(MARIO)
    expected = query_to_keys(record, locate(record, "he").positions,
                             locate(record, "Mario").positions)
    np.testing.assert_allclose(z_of(at, "Attention from the query"), expected, rtol=1e-6,
                               atol=1e-5)  # the page's trace against the test's forward
    table = at.dataframe[0].value
    assert len(table) == 72 and list(table[["layer", "head"]].iloc[0]) == [5, 5]
    assert table["attention"].iloc[0] == pytest.approx(record.weights[5, 5, 6, 1], rel=1e-6)
    assert table["strongest key"].iloc[0] == "mario"
    assert "Query: 'he' at position 6" in texts(at)
    at.button(key="finder_open_5_5").click().run()
    assert at.title[0].value == "Attention maps" and not at.error
    assert at.slider(key="maps_layer").value == 5 and at.slider(key="maps_head").value == 5


def test_head_finder_gives_the_same_scores_with_word_pieces_merged():
    text = "The armadillo didn't cross the street because it was too tired."
    state = {"finder_query": "it", "finder_keys": "armadillo"}
    pieces = run_page("head_finder", text=text, state=state)
    merged = run_page("head_finder", text=text, state={**state, "sb_merge_words": True})
    assert not pieces.error and not merged.error
    record = minilm_record(text)
    assert record.tokens[2:5] == ("arm", "##adi", "##llo")
    assert "armadillo" in merge_word_pieces(record).tokens
    expected = query_to_keys(record, locate(record, "it").positions, (2, 3, 4))
    np.testing.assert_allclose(z_of(pieces, "Attention from the query"), expected, rtol=1e-6,
                               atol=1e-5)
    np.testing.assert_allclose(z_of(merged, "Attention from the query"), expected, rtol=1e-5)


def test_head_finder_bad_input_gets_one_sentence():
    at = run_page("head_finder", text=MARIO, state={"finder_query": "he", "finder_keys": "Luigi"})
    assert [e.value for e in at.error] == [plain(
        "'Luigi' is not in the text; type a word exactly as it appears in the sentence.")]
    assert not figures(at)
    at = run_page("head_finder", text=MARIO, state={"finder_query": "he", "finder_keys": " , "})
    assert not at.error and "Type a query token and at least one key token" in at.info[0].value
    assert not figures(at)


def test_head_finder_suggests_words_of_the_sentence_and_opens_the_chapters_example():
    at = run_page("head_finder", text="Time flies like an arrow.")
    assert plain("'arrow' as the query and 'time' as the key") in at.info[0].value  # not [SEP]
    assert not figures(at)
    at.button(key="finder_mario").click().run()
    assert at.session_state["sb_text"] == MARIO and at.text_input(key="finder_query").value == "he"
    assert not at.info and not at.error and figures(at)  # every head ranked on that sentence


# Head detectors

def test_previous_token_detector_map_on_the_sentence():
    at = run_page("head_detectors", state={"detectors_kind": "previous-token"})
    assert not at.error
    expected = previous_token_scores(minilm_record("Time flies like an arrow."))
    z = z_of(at, "previous-token score")
    np.testing.assert_allclose(z, expected, rtol=1e-6, atol=1e-5)
    assert z.max() > 0.9  # MiniLM has a previous-token head, as Clark et al. found in BERT
    assert "Previous-token score: the weight each query token puts on the token just before" \
        in texts(at)


def test_induction_detector_runs_the_model_on_repeated_random_tokens():
    at = run_page("head_detectors", state={"detectors_kind": "induction",
                                           "detectors_length": 10, "detectors_seed": 3})
    assert not at.error
    from ui import analysis_cache
    record = analysis_cache.repeated_tokens(ModelSource(PRETRAINED, DEFAULT_MODEL), 10, 3)
    assert record.num_tokens == 22 and record.tokens[1:11] == record.tokens[11:21]
    np.testing.assert_allclose(z_of(at, "induction score"), induction_scores(record), rtol=1e-6,
                               atol=1e-5)
    assert "repeated twice" in texts(at)


def test_separator_detector_on_a_decoder_without_special_tokens_says_why(tiny_decoder):
    at = run_page("head_detectors", state=decoder_state(tiny_decoder,
                                                        detectors_kind="[SEP] sink"))
    assert not at.error and not figures(at)
    assert "no [SEP]-like special token" in at.info[0].value.replace("\\", "")


# Ablation and knockout

def test_encoder_without_a_prediction_head_gets_one_sentence(monkeypatch):
    monkeypatch.setattr(finetune_cache, "finished", lambda encoder_name: [])  # none trained yet
    at = run_page("ablation")
    assert not at.error and not figures(at)
    assert [w.value for w in at.warning] == [plain(targets.no_prediction_message(DEFAULT_MODEL))]
    assert "once one has been fine-tuned on the Fine-tuning page" in texts(at)
    assert "ablation_subject" not in [r.key for r in at.radio]  # nothing to choose, no training


def test_ablating_heads_of_a_decoder_shows_the_change(tiny_decoder):
    at = run_page("ablation", state=decoder_state(tiny_decoder, ablation_heads=["0-1", "1-3"],
                                                  ablation_target="banana"))
    assert not at.error
    loaded = cache.decoder(tiny_decoder)
    model = install(loaded.model)
    prepared = targets.prepare(model, loaded.tokenizer, loaded.max_tokens,
                                "Time flies like an arrow.", True, tiny_decoder)
    target = targets.target_from_text(prepared, loaded.tokenizer, "banana")
    expected = ablation.ablate_heads(model, prepared, loaded.tokenizer, target, [(0, 1), (1, 3)])
    plain_metric, ablated_metric = at.metric[0], at.metric[1]
    assert float(plain_metric.value) == pytest.approx(expected.before.probability, rel=1e-3)
    assert float(ablated_metric.value) == pytest.approx(expected.after.probability, rel=1e-3)
    assert float(ablated_metric.delta) == pytest.approx(expected.change, rel=1e-3)
    predictions = at.dataframe[0].value
    assert predictions["P after"].iloc[0] == pytest.approx(
        expected.after.candidates[0].probability, rel=1e-5)
    assert len([f for f in figures(at) if f["layout"]["title"]["text"].startswith("Layer")]) == 2


def test_empty_and_full_ablations_and_the_grid(tiny_decoder):
    at = run_page("ablation", state=decoder_state(tiny_decoder))
    assert not at.error and "Choose at least one head to ablate." in [i.value for i in at.info]
    every = [f"{layer}-{head}" for layer in range(2) for head in range(4)]
    at = run_page("ablation", state=decoder_state(tiny_decoder, ablation_heads=every))
    assert not at.error
    assert any("Every head is ablated" in w.value for w in at.warning)
    at.button(key="ablation_grid_run").click().run()
    assert not at.error
    loaded = cache.decoder(tiny_decoder)
    prepared = targets.prepare(loaded.model, loaded.tokenizer, loaded.max_tokens,
                                "Time flies like an arrow.", True, tiny_decoder)
    target = ablation.predict(loaded.model, prepared, loaded.tokenizer).target
    expected = ablation.importance_grid(loaded.model, prepared, target, batch_size=1)
    np.testing.assert_allclose(z_of(at, "when one head is ablated"), expected.numpy(),
                               atol=1e-5)


def test_knockout_tab_shows_the_change_and_refuses_blocking_everything(tiny_decoder):
    at = run_page("ablation", state=decoder_state(tiny_decoder, ablation_ko_keys=[0, 1]))
    assert not at.error
    labels = [m.label for m in at.metric]
    assert any("edges blocked in layers 0–1" in label.replace("\\", "") for label in labels)
    at = run_page("ablation", state=decoder_state(tiny_decoder, ablation_ko_query=0,
                                                  ablation_ko_keys=[0]))
    assert [e.value for e in at.error] == [plain(
        "Blocking every token the query can see leaves its attention nothing to spread over: "
        "keep at least one key.")]


def test_masked_language_model_predicts_the_hidden_word(monkeypatch, default_model):
    """A masked LM (MiniLM's encoder under a masked-LM head) through the same page."""
    masked_lm = install(BertForMaskedLM.from_pretrained(
        default_model_path(), attn_implementation="eager", use_safetensors=True,
        local_files_only=True).eval())
    real = cache.model_and_tokenizer

    def with_head(source):
        model, tokenizer, limit = real(source)
        return (masked_lm, tokenizer, limit) if source.kind == PRETRAINED.value else (model,
                                                                                 tokenizer, limit)

    monkeypatch.setattr(cache, "model_and_tokenizer", with_head)
    at = run_page("ablation", state={"ablation_mask": 2, "ablation_heads": ["5-5"]})
    assert not at.error
    assert "with 'flies' masked" in texts(at)
    prepared = targets.prepare(masked_lm, default_model.tokenizer, 512,
                                "Time flies like an arrow.", False, DEFAULT_MODEL)
    prepared, target = targets.with_mask(prepared, default_model.tokenizer, 2)
    expected = ablation.ablate_heads(masked_lm, prepared, default_model.tokenizer, target,
                                     [(5, 5)])
    assert float(at.metric[0].value) == pytest.approx(expected.before.probability, rel=1e-3)
    assert float(at.metric[1].value) == pytest.approx(expected.after.probability, rel=1e-3)


# A fine-tuned classifier

REVIEW = "The waiter was friendly and the soup was delicious."


@pytest.fixture(scope="module")
def tiny_classifier(default_model) -> finetune_cache.Finished:
    """A from-scratch classifier trained for 2 steps, put in the server's fine-tune store as the
    Fine-tuning page would."""
    data = load_shipped()
    settings = default_settings(SCRATCH, 1)
    classifier = scratch_classifier(scratch_encoder_config(len(default_model.tokenizer)), 2,
                                    settings.pooling, settings.seed)
    result = finetune(classifier, default_model.tokenizer, data, settings, max_steps=2)
    key = finetune_cache.training_key(DEFAULT_MODEL, data, settings)
    finetune_cache.store().put(key, result)
    return next(f for f in finetune_cache.finished(DEFAULT_MODEL) if f.key == key)


def test_fine_tuned_classifier_is_ablated_with_its_class_probability(tiny_classifier,
                                                                     default_model):
    trainings = finetune_cache.store().trainings
    heads = [(0, 1), (3, 2)]
    at = run_page("ablation", text=REVIEW, state={
        "ablation_subject": "classifier", "ablation_classifier": tiny_classifier.key,
        "ablation_class": 0, "ablation_heads": ["0-1", "3-2"], "ablation_ko_keys": [1, 2]})
    assert not at.error, [e.value for e in at.error]
    assert finetune_cache.store().trainings == trainings  # never trains here
    classifier = tiny_classifier.result.classifier
    labels = targets.ClassLabels(tiny_classifier.result.class_names)
    prepared = targets.prepare(classifier, default_model.tokenizer, 64, REVIEW, False, "c")
    target = targets.class_target(labels, 0)
    expected = ablation.ablate_heads(classifier, prepared, labels, target, heads)
    metrics = {m.label: m for m in at.metric}
    before = metrics[plain("P('negative') without any edit")]
    after = metrics[plain("P('negative') with 2 head(s) ablated")]
    assert float(before.value) == pytest.approx(expected.before.probability, rel=1e-3)
    assert float(after.value) == pytest.approx(expected.after.probability, rel=1e-3)
    assert float(after.delta) == pytest.approx(expected.change, rel=1e-3, abs=1e-6)
    assert at.dataframe[0].value["P after"].iloc[0] == pytest.approx(
        expected.after.candidates[0].probability, rel=1e-5)
    maps = [f for f in figures(at) if f["layout"]["title"]["text"].startswith("Layer")]
    assert len(maps) == 2  # before and after, the classifier's own 4 x 4 heads
    np.testing.assert_allclose(array(maps[1]["data"][0]["z"]),
                               expected.after.record.weights[0, 0], atol=1e-5)
    assert "reads the sidebar's first sentence" in texts(at)
    assert any("edges blocked in layers 0–3" in m.label.replace("\\", "") for m in at.metric)

    at.button(key="ablation_grid_run").click().run()
    assert not at.error, [e.value for e in at.error]
    grid = ablation.importance_grid(classifier, prepared, target, batch_size=1)
    np.testing.assert_allclose(z_of(at, "when one head is ablated"), grid.numpy(), atol=1e-5)


def test_fine_tuned_classifier_is_offered_when_the_sidebar_model_predicts_nothing(
        tiny_classifier, default_model):
    at = run_page("ablation", text=REVIEW)
    assert not at.error and not at.warning
    assert at.radio(key="ablation_subject").value == "classifier"
    shown = at.selectbox(key="ablation_classifier")
    assert tiny_classifier.key in shown.options or tiny_classifier.description in shown.options
    chosen = next(f for f in finetune_cache.finished(DEFAULT_MODEL) if f.key == shown.value)
    assert chosen.key == finetune_cache.finished(DEFAULT_MODEL)[0].key  # the most recent
    labels = targets.ClassLabels(chosen.result.class_names)
    prepared = targets.prepare(chosen.result.classifier, default_model.tokenizer,
                                chosen.result.settings.max_tokens, REVIEW, False, "c")
    predicted = ablation.predict(chosen.result.classifier, prepared, labels, keep_record=False)
    assert at.selectbox(key="ablation_class").value == predicted.target.token_id
    assert float(at.metric[0].value) == pytest.approx(predicted.probability, rel=1e-3)
