"""Which heads matter: head finder, detectors and norm-based attention (ablation and knockout:
tests/experiments/test_head_ablation.py).

Detectors are checked on hand-built records with a perfect pattern; the norm-based maps on tiny
BERT / GPT-2 / Llama models with random weights (tests/analysis/head_models.py), against the same
computation done by hand on the model's weights.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import GPT2LMHeadModel, LlamaForCausalLM

from models.experiments import ablation, targets

from models.analysis import detectors
from models.hooks.capture import run_captured
from models.hooks.install import install
from models.analysis.head_finder import (TokenNotFound, find_spans, locate, normalise_token,
                                  parse_token_list, query_to_keys, strongest_keys)
from models.analysis.norm_shares import with_norm_columns
from models.analysis.norms import norm_maps
from models.analysis.repeated_tokens import random_token_ids, repeated_tokens_record
from models.analysis.statistics import head_statistics
from models.analysis.token_options import merge_word_pieces
from models.hooks.record import AttentionRecord
from tests.reference import encoder_record
from viz import style
from viz.head_analysis import layer_head_map, ranking_table
from tests.analysis.head_models import (SENTENCE, gpt2_tokenizer,  # noqa: F401 (fixtures)
                                        llama_input, tiny_bert, tiny_gpt2, tiny_llama)


# Hand-built records

def record_of(weights: np.ndarray, tokens=None, special=()) -> AttentionRecord:
    count = weights.shape[-1]
    tokens = tokens or tuple(f"t{i}" for i in range(count))
    return AttentionRecord(tokens=tuple(tokens), weights=weights, source="hand-built",
                           special_positions=tuple(special))


def one_hot_rows(count: int, key_of) -> np.ndarray:
    """(1, 1, Q, K) with all of row i on key_of(i)."""
    weights = np.zeros((1, 1, count, count), dtype=np.float32)
    for query in range(count):
        weights[0, 0, query, key_of(query)] = 1.0
    return weights


def uniform(count: int) -> np.ndarray:
    return np.full((2, 3, count, count), 1.0 / count, dtype=np.float32)


REPEAT = 10
REPEATED_TOKENS = ("[CLS]",) + tuple(f"w{i}" for i in range(REPEAT)) * 2 + ("[SEP]",)
REPEATED_SPECIAL = (0, 2 * REPEAT + 1)


def test_previous_token_detector_is_one_on_a_perfect_head_and_small_on_uniform():
    perfect = record_of(one_hot_rows(12, lambda q: max(q - 1, 0)))
    np.testing.assert_allclose(detectors.previous_token_scores(perfect), [[1.0]])
    scores = detectors.previous_token_scores(record_of(uniform(64)))
    assert scores.shape == (2, 3)
    np.testing.assert_allclose(scores, 1 / 64, rtol=1e-5)


def test_induction_and_duplicate_detectors_on_a_perfect_repeated_sequence():
    count = len(REPEATED_TOKENS)
    second_copy = range(REPEAT + 1, 2 * REPEAT + 1)
    # Induction: a token of the second copy looks at the token after its first occurrence.
    induction = record_of(one_hot_rows(count, lambda q: q - REPEAT + 1 if q in second_copy else q),
                          REPEATED_TOKENS, REPEATED_SPECIAL)
    np.testing.assert_allclose(detectors.induction_scores(induction), [[1.0]])
    assert detectors.duplicate_token_scores(induction)[0, 0] == pytest.approx(0.0)
    duplicate = record_of(one_hot_rows(count, lambda q: q - REPEAT if q in second_copy else q),
                          REPEATED_TOKENS, REPEATED_SPECIAL)
    np.testing.assert_allclose(detectors.duplicate_token_scores(duplicate), [[1.0]])
    assert detectors.induction_scores(duplicate)[0, 0] == pytest.approx(0.0)
    even = record_of(uniform(count), REPEATED_TOKENS, REPEATED_SPECIAL)
    for score in (detectors.induction_scores, detectors.duplicate_token_scores):
        np.testing.assert_allclose(score(even), 1 / count, rtol=1e-5)


def test_sink_detectors_and_inputs_they_cannot_measure():
    count = 16
    special = (0, count - 1)
    first = record_of(one_hot_rows(count, lambda q: 0), special=special)
    np.testing.assert_allclose(detectors.first_token_scores(first), [[1.0]])
    assert detectors.separator_scores(first)[0, 0] == 0.0
    last = record_of(one_hot_rows(count, lambda q: count - 1), special=special)
    np.testing.assert_allclose(detectors.separator_scores(last), [[1.0]])
    even = record_of(uniform(count), special=special)
    np.testing.assert_allclose(detectors.first_token_scores(even), 1 / count, rtol=1e-5)
    with pytest.raises(detectors.NotMeasurable, match="no \\[SEP\\]-like"):
        detectors.separator_scores(record_of(uniform(4)))
    with pytest.raises(detectors.NotMeasurable, match="No token occurs twice"):
        detectors.induction_scores(record_of(uniform(4)))
    assert {d.name for d in detectors.DETECTORS} == {
        "previous-token", "duplicate-token", "induction", "first-token sink", "[SEP] sink"}
    assert all(d.definition.endswith(".") for d in detectors.DETECTORS)


# Head finder

def test_tokens_are_found_case_insensitively_without_piece_markers():
    tokens = ("[CLS]", "ĠMario", "Ġjump", "##ing", "▁he", "[SEP]")
    assert normalise_token("ĠMario") == "mario" and normalise_token("##ing") == "ing"
    assert [s.positions for s in find_spans(tokens, "mario")] == [(1,)]
    assert [s.positions for s in find_spans(tokens, "He")] == [(4,)]
    assert [s.positions for s in find_spans(tokens, "Jumping")] == [(2, 3)]
    assert parse_token_list(" Mario, he ,, ") == ("Mario", "he")
    record = record_of(uniform(6), tokens)
    with pytest.raises(TokenNotFound, match="^'Luigi' is not in the text; [^.]*\\.$"):
        locate(record, "Luigi")
    with pytest.raises(TokenNotFound, match="No token was given"):
        locate(record, "  ")


def test_head_scores_are_the_same_with_word_pieces_merged_or_not():
    rng = np.random.default_rng(0)
    tokens = ("[CLS]", "he", "jump", "##ing", "over", "mario", "##s", "[SEP]")
    weights = rng.random((2, 3, 8, 8)).astype(np.float32)
    weights /= weights.sum(axis=-1, keepdims=True)
    record = record_of(weights, tokens, (0, 7))
    query, keys = locate(record, "jumping").positions, locate(record, "marios").positions
    scores = query_to_keys(record, query, keys)
    expected = weights[:, :, [2, 3], :][..., [5, 6]].sum(axis=-1).mean(axis=-1)
    np.testing.assert_allclose(scores, expected, rtol=1e-6, atol=1e-5)
    merged = merge_word_pieces(record)
    merged_scores = query_to_keys(merged, locate(merged, "jumping").positions,
                                  locate(merged, "marios").positions)
    np.testing.assert_allclose(merged_scores, scores, rtol=1e-5)
    table = ranking_table(scores, [[record.tokens[k] for k in row]
                                   for row in strongest_keys(record, query)])
    assert list(table["rank"]) == list(range(1, 7))
    assert table["attention"].is_monotonic_decreasing
    best = table.iloc[0]
    assert best["attention"] == pytest.approx(scores.max())
    assert best["strongest key"] == record.tokens[
        weights[best["layer"], best["head"], [2, 3]].mean(axis=0).argmax()]
    with pytest.raises(ValueError, match="at least one key"):
        query_to_keys(record, query, ())


def test_minilm_has_a_head_linking_he_to_mario(default_model):
    record = encoder_record(default_model, "Mario is short, but he can jump super high.")
    query, key = locate(record, "he"), locate(record, "Mario")
    assert record.tokens[query.start] == "he" and record.tokens[key.start] == "mario"
    scores = query_to_keys(record, query.positions, key.positions)
    assert scores.shape == (6, 12)
    layer, head = np.unravel_index(scores.argmax(), scores.shape)
    assert scores[layer, head] == pytest.approx(
        record.weights[layer, head, query.start, key.start])
    # A real coreference-like head: most of "he"'s attention goes to "mario" (0.81 measured).
    assert scores[layer, head] > 0.6 and layer >= 3


# Norm-based attention

def hand_norms(model, prepared) -> np.ndarray:
    """(H, Q, K) alpha_ij ||v_j W_O^h|| of layer 0, from the weights, without the capture."""
    inputs = prepared.inputs
    with torch.inference_mode():
        output = model(**inputs, output_attentions=True, output_hidden_states=True)
        weights = output.attentions[0][0]  # (H, Q, K)
        if isinstance(model, LlamaForCausalLM):
            attention = model.model.layers[0].self_attn
            x = model.model.layers[0].input_layernorm(output.hidden_states[0][0])
            value = attention.v_proj(x).view(x.size(0), 2, 8).transpose(0, 1)  # (Hkv, T, Dh)
            value = value.repeat_interleave(2, dim=0)  # (H, T, Dh)
            out = attention.o_proj.weight  # (D, H*Dh)
        elif isinstance(model, GPT2LMHeadModel):
            block = model.transformer.h[0]
            x = block.ln_1(output.hidden_states[0][0])
            value = block.attn.c_attn(x)[:, 64:].view(x.size(0), 4, 8).transpose(0, 1)
            out = block.attn.c_proj.weight.T  # Conv1D keeps (in, out)
        else:
            attention = model.bert.encoder.layer[0].attention
            x = output.hidden_states[0][0]
            value = attention.self.value(x).view(x.size(0), 4, 8).transpose(0, 1)
            out = attention.output.dense.weight
        norms = torch.stack([(value[h] @ out[:, h * 8:(h + 1) * 8].T).norm(dim=-1)
                             for h in range(4)])  # (H, K)
        return (weights * norms[:, None, :]).numpy()


@pytest.mark.parametrize("name", ["llama", "gpt2", "bert"])
def test_norm_based_maps_equal_a_hand_computation(name, tiny_llama, tiny_gpt2, tiny_bert,
                                                  gpt2_tokenizer, default_model):
    if name == "llama":
        model, prepared = tiny_llama, llama_input()
    elif name == "gpt2":
        model = tiny_gpt2
        prepared = targets.prepare(model, gpt2_tokenizer, 64, SENTENCE, True, "tiny gpt2")
    else:
        model = tiny_bert
        prepared = targets.prepare(model, default_model.tokenizer, 64, SENTENCE, False, "bert")
    maps = norm_maps(run_captured(model, prepared.inputs))
    assert maps.shape[:2] == (model.config.num_hidden_layers, 4)
    np.testing.assert_allclose(maps[0], hand_norms(model, prepared), rtol=1e-4, atol=1e-5)


def test_norm_columns_equal_the_weight_columns_when_every_value_has_the_same_norm():
    rng = np.random.default_rng(3)
    weights = rng.random((2, 3, 6, 6)).astype(np.float32)
    weights /= weights.sum(axis=-1, keepdims=True)
    record = record_of(weights, ("[CLS]", "a", "b", "c", "d", "[SEP]"), (0, 5))
    table = head_statistics(record)
    extended = with_norm_columns(table, record, 2.5 * weights)
    np.testing.assert_allclose(extended["norm_cls"], table["cls"], rtol=1e-5)
    np.testing.assert_allclose(extended["norm_sep"], table["sep"], rtol=1e-5)
    shrunk = 2.5 * weights
    shrunk[..., 0] *= 0.1  # [CLS]'s transformed value is short: its norm share drops
    assert (with_norm_columns(table, record, shrunk)["norm_cls"] < table["cls"]).all()
    assert list(extended.columns[:len(table.columns)]) == list(table.columns)


def test_minilm_puts_much_weight_on_cls_that_moves_little(default_model):
    """Kobayashi et al. (2020)'s finding, on the real MiniLM: [CLS] gets most of the weight,
    but its transformed value vector is short, so its share of the norm-based map is small."""
    model = install(default_model.model)
    prepared = targets.prepare(model, default_model.tokenizer, 512, SENTENCE, False, "MiniLM")
    record = encoder_record(default_model, SENTENCE)
    table = with_norm_columns(head_statistics(record), record,
                              norm_maps(ablation.plain_run(model, prepared)))
    assert table["cls"].mean() > 0.5 and table["norm_cls"].mean() < 0.25  # 0.57 and 0.15
    assert (table["norm_cls"] < table["cls"]).mean() > 0.9  # 71 of 72 heads


# The repeated random sequence, through a model

def test_repeated_random_tokens_record_on_a_tiny_gpt2(tiny_gpt2, gpt2_tokenizer):
    ids = random_token_ids(gpt2_tokenizer, 12, seed=4)
    assert len(set(ids)) == 12 and gpt2_tokenizer.eos_token_id not in ids
    assert ids == random_token_ids(gpt2_tokenizer, 12, seed=4)
    record = repeated_tokens_record(tiny_gpt2, gpt2_tokenizer, 64, True, "tiny", 12, 4)
    assert record.num_tokens == 24 and record.tokens[:12] == record.tokens[12:]
    assert record.masks == ("causal",)
    for detector in detectors.DETECTORS:
        if detector.name == "[SEP] sink":
            continue
        scores = detector.score(record)
        assert scores.shape == (2, 4) and scores.min() >= 0.0 and scores.max() <= 1.0
    with pytest.raises(detectors.NotMeasurable, match="do not fit"):
        repeated_tokens_record(tiny_gpt2, gpt2_tokenizer, 20, True, "tiny", 12, 4)


def test_layer_head_map_shows_the_scores():
    scores = np.arange(12, dtype=float).reshape(3, 4) / 12
    figure = layer_head_map(scores, "induction", "score")
    np.testing.assert_allclose(np.asarray(figure.data[0].z), scores)
    assert figure.layout.yaxis.title.text == "layer" and figure.layout.xaxis.title.text == "head"


@pytest.mark.parametrize(("layers", "heads"), [(30, 9), (6, 12), (1, 4)])
def test_layer_head_maps_fill_the_width_and_grow_with_their_layers(layers, heads):
    """Cells need not be square on a layer x head map: it takes the page's width and a height
    that grows with its layers, within what a 1280 x 720 screen shows."""
    figure = layer_head_map(np.zeros((layers, heads)), "induction", "score")
    assert figure.layout.yaxis.scaleanchor is None and figure.layout.width is None
    expected = style.ROWS_TOP_PX + style.ROW_PX * layers
    assert figure.layout.height == min(style.ROWS_MAX_PX, max(style.ROWS_MIN_PX, expected))
    assert style.ROWS_MIN_PX <= figure.layout.height <= style.ROWS_MAX_PX

