"""Which heads matter: head finder, detectors, ablation, knockout and norm-based attention.

Detectors are checked on hand-built records with a perfect pattern; ablation, knockout and the
norm-based maps on tiny BERT / GPT-2 / Llama models with random weights, against the same
computation done by hand on the model's weights.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from tokenizers import ByteLevelBPETokenizer
from transformers import (BertConfig, BertForMaskedLM, BertModel, GPT2Config,
                          GPT2LMHeadModel, GPT2TokenizerFast, LlamaConfig, LlamaForCausalLM)

from models.experiments import ablation

from models.analysis import detectors
from models.hooks.attention import ATTENTION_NAME
from models.hooks.capture import Intervention, run_captured
from models.hooks.install import install
from models.experiments.classifier import SequenceClassifier, scratch_classifier
from models.scratch.config import EncoderConfig
from models.analysis.head_finder import (TokenNotFound, find_spans, locate, normalise_token,
                                  parse_token_list, query_to_keys, strongest_keys)
from models.analysis.norm_shares import with_norm_columns
from models.analysis.norms import norm_maps
from models.analysis.repeated_tokens import random_token_ids, repeated_tokens_record
from models.analysis.statistics import head_statistics
from models.analysis.token_options import merge_word_pieces
from models.hooks.record import AttentionRecord
from models.loading.tokenize import EncodedText
from tests.reference import encoder_record
from viz import style
from viz.head_analysis import (importance_map, layer_head_map, most_important,
                               ranking_table)

SENTENCE = "Time flies like an arrow."
LONGER = "The quick brown fox jumps over the lazy dog while the cat watches from the mat."
END = "<|endoftext|>"
ATOL = 1e-5
INIT = 0.2  # larger than the default 0.02, so one head visibly moves a prediction


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


# Tiny models

@pytest.fixture(scope="module")
def gpt2_tokenizer() -> GPT2TokenizerFast:
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator([SENTENCE, "Fruit flies like a banana.", LONGER] * 4, vocab_size=320,
                            min_frequency=1, special_tokens=[END], show_progress=False)
    return GPT2TokenizerFast(tokenizer_object=bpe._tokenizer, bos_token=END, eos_token=END,
                             unk_token=END)


@pytest.fixture(scope="module")
def tiny_gpt2(gpt2_tokenizer) -> GPT2LMHeadModel:
    torch.manual_seed(0)
    end = gpt2_tokenizer.convert_tokens_to_ids(END)
    config = GPT2Config(vocab_size=len(gpt2_tokenizer), n_positions=64, n_embd=32, n_layer=2,
                        n_head=4, bos_token_id=end, eos_token_id=end,
                        initializer_range=INIT)
    return install(GPT2LMHeadModel(config).eval())


@pytest.fixture(scope="module")
def tiny_llama() -> LlamaForCausalLM:
    torch.manual_seed(1)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64, initializer_range=INIT)
    return install(LlamaForCausalLM(config).eval())


@pytest.fixture(scope="module")
def tiny_bert(default_model) -> BertForMaskedLM:
    torch.manual_seed(2)
    config = BertConfig(vocab_size=len(default_model.tokenizer), hidden_size=32,
                        num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                        max_position_embeddings=64, initializer_range=INIT)
    return install(BertForMaskedLM(config).eval())


def llama_input(count: int = 9) -> ablation.PreparedInput:
    """Hand-made ids for the tiny Llama (it has no tokenizer)."""
    ids = torch.tensor([[5, 17, 33, 8, 41, 17, 33, 2, 60][:count]])  # (1, T)
    encoded = EncodedText(
        input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=None,
        tokens=tuple(f"t{i}" for i in ids[0].tolist()), segment_ids=(0,) * ids.size(1),
        special_positions=(), dropped_tokens=0)
    return ablation.PreparedInput(encoded, {"input_ids": ids, "attention_mask": encoded.attention_mask},
                                  True, "tiny llama")


class Ids:
    """A stand-in tokenizer for the tiny Llama: ids are written as t<id>."""

    def decode(self, ids, **_):
        return " ".join(f"t{i}" for i in ids)

    def convert_ids_to_tokens(self, ids):
        return f"t{ids}" if isinstance(ids, int) else [f"t{i}" for i in ids]


def plain_logits(model, prepared) -> torch.Tensor:
    with torch.inference_mode():
        return model(**prepared.inputs).logits


def test_ablating_a_head_whose_output_is_zero_changes_nothing(tiny_gpt2, gpt2_tokenizer):
    model = copy.deepcopy(tiny_gpt2)
    width, head_width, layer, head = 32, 8, 1, 2
    with torch.no_grad():  # GPT-2's c_attn is Conv1D: (in, 3 * D) holding q | k | v
        start = 2 * width + head * head_width
        model.transformer.h[layer].attn.c_attn.weight[:, start:start + head_width] = 0.0
        model.transformer.h[layer].attn.c_attn.bias[start:start + head_width] = 0.0
    prepared = ablation.prepare(model, gpt2_tokenizer, 64, LONGER, True, "tiny gpt2")
    target = ablation.target_from_text(prepared, gpt2_tokenizer, "cat")
    for mode in ablation.ABLATION_MODES:
        result = ablation.ablate_heads(model, prepared, gpt2_tokenizer, target, [(layer, head)],
                                       mode)
        assert result.after.log_probability == pytest.approx(result.before.log_probability,
                                                             abs=1e-5)
        np.testing.assert_allclose(result.after.record.weights, result.before.record.weights,
                                   atol=1e-5)
    other = ablation.ablate_heads(model, prepared, gpt2_tokenizer, target, [(0, 0)])
    assert abs(other.change) > 0  # a head with an output does change the prediction


def zero_output_columns(model, layer: int, head: int, head_width: int):
    """A copy of `model` with head `head`'s slice of layer `layer`'s W_O set to 0 by hand."""
    edited = copy.deepcopy(model)
    columns = slice(head * head_width, (head + 1) * head_width)
    with torch.no_grad():
        if isinstance(edited, LlamaForCausalLM):
            edited.model.layers[layer].self_attn.o_proj.weight[:, columns] = 0.0
        elif isinstance(edited, GPT2LMHeadModel):  # Conv1D: (in, out), so rows are the input
            edited.transformer.h[layer].attn.c_proj.weight[columns, :] = 0.0
        else:
            edited.bert.encoder.layer[layer].attention.output.dense.weight[:, columns] = 0.0
    return edited


@pytest.mark.parametrize("name", ["llama", "gpt2", "bert"])
def test_zero_ablation_equals_zeroing_the_heads_output_weights_by_hand(
        name, tiny_llama, tiny_gpt2, tiny_bert, gpt2_tokenizer, default_model):
    heads = [(1, 2), (0, 3)]
    if name == "llama":
        model, tokenizer, prepared = tiny_llama, Ids(), llama_input()
        target = ablation.next_token_target(prepared, tokenizer, 7)
    elif name == "gpt2":
        model, tokenizer = tiny_gpt2, gpt2_tokenizer
        prepared = ablation.prepare(model, tokenizer, 64, LONGER, True, "tiny gpt2")
        target = ablation.target_from_text(prepared, tokenizer, "mat")
    else:
        model, tokenizer = tiny_bert, default_model.tokenizer
        prepared = ablation.prepare(model, tokenizer, 64, SENTENCE, False, "tiny bert")
        prepared, target = ablation.with_mask(prepared, tokenizer, 2)
        assert prepared.encoded.tokens[2] == "[MASK]" and target.text == "flies"
    edited = model
    for layer, head in heads:
        edited = zero_output_columns(edited, layer, head, 8)
    result = ablation.ablate_heads(model, prepared, tokenizer, target, heads)
    logits = plain_logits(edited, prepared)[0, target.position]
    expected = torch.log_softmax(logits, dim=-1)[target.token_id]
    assert result.after.log_probability == pytest.approx(float(expected), abs=ATOL)
    before = torch.log_softmax(plain_logits(model, prepared)[0, target.position], -1)
    assert result.before.log_probability == pytest.approx(float(before[target.token_id]),
                                                          abs=ATOL)
    assert abs(result.after.log_probability - result.before.log_probability) > 100 * ATOL
    assert result.before.candidates[0].probability >= result.before.probability


def test_mean_ablation_puts_the_heads_mean_output_at_every_position(tiny_llama):
    prepared = llama_input()
    base = ablation.plain_run(tiny_llama, prepared)
    mean = ablation.mean_head_outputs(base)  # (L, H, Dh)
    edit = Intervention(head_scale=ablation.ablation_scale(3, 4, [(2, 1)]),
                        head_replacement=mean)
    run = ablation.plain_run(tiny_llama, prepared, edit)
    context = run.layers[2].context[0]  # (T, H, Dh)
    np.testing.assert_allclose(context[:, 1].numpy(), mean[2, 1].expand(9, -1).numpy(),
                               atol=1e-5)
    np.testing.assert_allclose(context[:, 0].numpy(), base.layers[2].context[0, :, 0].numpy(),
                               atol=1e-5)  # the other heads of the layer are untouched


def test_batched_importance_grid_equals_one_ablation_at_a_time(tiny_llama):
    prepared = llama_input()
    target = ablation.next_token_target(prepared, Ids(), 11)
    calls = []
    grid = ablation.importance_grid(tiny_llama, prepared, target, batch_size=5,
                                    progress=lambda done, total: calls.append((done, total)))
    assert grid.shape == (3, 4)
    assert calls == [(5, 12), (10, 12), (12, 12)]
    for layer in range(3):
        for head in range(4):
            single = ablation.ablate_heads(tiny_llama, prepared, Ids(), target, [(layer, head)])
            change = single.after.log_probability - single.before.log_probability
            assert float(grid[layer, head]) == pytest.approx(change, abs=ATOL)
    mean_grid = ablation.importance_grid(tiny_llama, prepared, target, ablation.MEAN,
                                         batch_size=12)
    single = ablation.ablate_heads(tiny_llama, prepared, Ids(), target, [(2, 3)], ablation.MEAN)
    assert float(mean_grid[2, 3]) == pytest.approx(
        single.after.log_probability - single.before.log_probability, abs=ATOL)
    table = most_important(grid.numpy(), 3)
    assert abs(table.iloc[0, 2]) == pytest.approx(float(grid.abs().max()))
    figure = importance_map(grid.numpy(), "t11")
    assert figure.data[0].zmid == 0.0 and np.asarray(figure.data[0].z).shape == (3, 4)


def test_knockout_of_no_edges_equals_the_plain_run_and_blocked_edges_get_no_weight(tiny_gpt2,
                                                                                   gpt2_tokenizer):
    prepared = ablation.prepare(tiny_gpt2, gpt2_tokenizer, 64, LONGER, True, "tiny gpt2")
    count = prepared.num_tokens
    plain = ablation.plain_run(tiny_gpt2, prepared)
    nothing = ablation.plain_run(tiny_gpt2, prepared, Intervention(
        blocked=torch.zeros(2, count, count, dtype=torch.bool)))
    torch.testing.assert_close(nothing.logits, plain.logits, rtol=0, atol=0)
    target = ablation.target_from_text(prepared, gpt2_tokenizer, "mat")
    query, keys = count - 1, [1, 2, 3]
    result = ablation.knockout(tiny_gpt2, prepared, gpt2_tokenizer, target, query, keys, [1])
    after = result.after.record.weights
    assert np.all(after[1, :, query, keys] == 0.0)
    np.testing.assert_allclose(after[0], result.before.record.weights[0], atol=1e-5)
    np.testing.assert_allclose(after[1].sum(axis=-1), 1.0, atol=1e-5)
    assert result.change != 0.0
    with pytest.raises(ValueError, match="keep at least one key"):
        ablation.knockout(tiny_gpt2, prepared, gpt2_tokenizer, target, 2, [0, 1, 2], [0])
    with pytest.raises(ValueError, match="at least one key"):
        ablation.knockout(tiny_gpt2, prepared, gpt2_tokenizer, target, 2, [], [0])


def test_models_without_a_prediction_head_say_so(default_model):
    model = install(default_model.model)  # plain eager attention outside a capture
    assert ablation.prediction_kind(model, default_model.tokenizer, False) is None
    prepared = ablation.prepare(model, default_model.tokenizer, 64, SENTENCE, False, "MiniLM")
    target = ablation.Target(1, 100, "x")
    with pytest.raises(ablation.NoPrediction, match="^MiniLM has no prediction head"):
        ablation.ablate_heads(model, prepared, default_model.tokenizer, target, [(0, 0)])
    with pytest.raises(ValueError, match="Choose at least one head"):
        ablation.ablate_heads(model, prepared, default_model.tokenizer, target, [])


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
        prepared = ablation.prepare(model, gpt2_tokenizer, 64, SENTENCE, True, "tiny gpt2")
    else:
        model = tiny_bert
        prepared = ablation.prepare(model, default_model.tokenizer, 64, SENTENCE, False, "bert")
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
    prepared = ablation.prepare(model, default_model.tokenizer, 512, SENTENCE, False, "MiniLM")
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


def test_grid_batches_shrink_for_long_inputs(tiny_llama):
    short = ablation.plain_run(tiny_llama, llama_input())
    assert ablation.grid_batch_size(short, llama_input()) == ablation.DEFAULT_BATCH
    # A long input: 3 layers x 4 heads x 1000^2 weights x 4 bytes = 48 MB per ablation
    long_ids = torch.arange(1000)[None] % 64  # (1, T)
    encoded = EncodedText(input_ids=long_ids, attention_mask=torch.ones_like(long_ids),
                          token_type_ids=None, tokens=tuple("t" for _ in range(1000)),
                          segment_ids=(0,) * 1000, special_positions=(), dropped_tokens=0)
    prepared = ablation.PreparedInput(encoded, {"input_ids": long_ids}, True, "long")
    assert ablation.grid_batch_size(short, prepared) == ablation.GRID_BUDGET_BYTES // (
        3 * 4 * 1000 * 1000 * 4 + 64 * 4)


# A fine-tuned classifier's class probability as the target

CLASSES = ("negative", "positive", "neutral")


@pytest.fixture(scope="module")
def tiny_classifiers(default_model) -> dict[str, SequenceClassifier]:
    """A tiny BERT (plain eager attention, not yet switched to the capture) and a tiny
    from-scratch encoder, each under a classification head, with random weights."""
    torch.manual_seed(3)
    config = BertConfig(vocab_size=len(default_model.tokenizer), hidden_size=32,
                        num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                        max_position_embeddings=64, initializer_range=INIT)
    bert = BertModel(config, add_pooling_layer=False).eval()
    bert.set_attn_implementation("eager")
    scratch = scratch_classifier(EncoderConfig(vocab_size=len(default_model.tokenizer),
                                               hidden_size=32, num_heads=4, num_layers=2,
                                               intermediate_size=64, max_positions=64), 3)
    with torch.no_grad():  # a head larger than BERT's initialiser, so classes differ visibly
        scratch.head.weight.normal_(0.0, 0.3)
    bert_classifier = SequenceClassifier(bert, 32, 3, pooling="cls", seed=4).eval()
    with torch.no_grad():
        bert_classifier.head.weight.normal_(0.0, 0.3)
    return {"bert": bert_classifier, "scratch": scratch}


def classifier_input(classifier, tokenizer) -> ablation.PreparedInput:
    return ablation.prepare(classifier, tokenizer, 64, SENTENCE, False, "tiny classifier")


def class_log_probabilities(classifier, prepared) -> torch.Tensor:
    with torch.inference_mode():
        inputs = prepared.inputs
        logits = classifier(inputs["input_ids"], inputs["attention_mask"],
                            inputs.get("token_type_ids"))  # (1, C)
    return torch.log_softmax(logits[0], dim=-1)


def without_head_outputs(classifier, heads, head_width: int = 8):
    """A copy of the classifier with each head's columns of its layer's W_O set to 0 by hand."""
    edited = copy.deepcopy(classifier)
    with torch.no_grad():
        for layer, head in heads:
            columns = slice(head * head_width, (head + 1) * head_width)
            if isinstance(edited.encoder, BertModel):
                edited.encoder.encoder.layer[layer].attention.output.dense.weight[:, columns] = 0
            else:
                edited.encoder.layers[layer].attention.output.weight[:, columns] = 0
    return edited


@pytest.mark.parametrize("name", ["bert", "scratch"])
def test_classifier_ablation_equals_zeroing_the_heads_output_weights_by_hand(
        name, tiny_classifiers, default_model):
    classifier = tiny_classifiers[name]
    labels = ablation.ClassLabels(CLASSES)
    assert ablation.prediction_kind(classifier, labels, False) == ablation.CLASS_PROBABILITY
    prepared = classifier_input(classifier, default_model.tokenizer)
    heads = [(1, 2), (0, 3)]
    plain = class_log_probabilities(classifier, prepared)
    for index, class_name in enumerate(CLASSES):
        target = ablation.class_target(labels, index)
        result = ablation.ablate_heads(classifier, prepared, labels, target, heads)
        expected = class_log_probabilities(without_head_outputs(classifier, heads), prepared)
        assert result.before.log_probability == pytest.approx(float(plain[index]), abs=ATOL)
        assert result.after.log_probability == pytest.approx(float(expected[index]), abs=ATOL)
        assert result.after.target.text == class_name
        assert abs(result.after.log_probability - result.before.log_probability) > 100 * ATOL
        assert {c.text for c in result.before.candidates} == set(CLASSES)
        assert result.before.candidates[0].probability == pytest.approx(
            float(plain.exp().max()), abs=ATOL)
        assert result.after.record.weights.shape == (2, 4, prepared.num_tokens,
                                                     prepared.num_tokens)
    if name == "bert":  # the capture was switched on for the encoder the test left on eager
        assert classifier.encoder.config._attn_implementation == ATTENTION_NAME
    predicted = ablation.predict(classifier, prepared, labels)
    assert predicted.target.token_id == int(plain.argmax())


@pytest.mark.parametrize("name", ["bert", "scratch"])
def test_classifier_grid_batched_equals_one_at_a_time(name, tiny_classifiers, default_model):
    classifier = tiny_classifiers[name]
    labels = ablation.ClassLabels(CLASSES)
    prepared = classifier_input(classifier, default_model.tokenizer)
    target = ablation.class_target(labels, 1)
    for mode in ablation.ABLATION_MODES:
        grid = ablation.importance_grid(classifier, prepared, target, mode, batch_size=3)
        assert grid.shape == (2, 4)
        for layer in range(2):
            for head in range(4):
                single = ablation.ablate_heads(classifier, prepared, labels, target,
                                               [(layer, head)], mode)
                assert float(grid[layer, head]) == pytest.approx(
                    single.after.log_probability - single.before.log_probability, abs=ATOL)
    whole = ablation.importance_grid(classifier, prepared, target)  # default batch: all at once
    torch.testing.assert_close(whole, ablation.importance_grid(classifier, prepared, target,
                                                               batch_size=1), rtol=0, atol=ATOL)


@pytest.mark.parametrize("name", ["bert", "scratch"])
def test_classifier_knockout_of_no_edges_equals_the_plain_run(name, tiny_classifiers,
                                                              default_model):
    classifier = tiny_classifiers[name]
    labels = ablation.ClassLabels(CLASSES)
    prepared = classifier_input(classifier, default_model.tokenizer)
    count = prepared.num_tokens
    plain = ablation.plain_run(classifier, prepared)
    nothing = ablation.plain_run(classifier, prepared, Intervention(
        blocked=torch.zeros(2, count, count, dtype=torch.bool)))
    torch.testing.assert_close(nothing.logits, plain.logits, rtol=0, atol=0)
    torch.testing.assert_close(plain.logits[0, 0].log_softmax(-1),
                               class_log_probabilities(classifier, prepared), rtol=0, atol=ATOL)
    target = ablation.class_target(labels, 0)
    result = ablation.knockout(classifier, prepared, labels, target, 0, [1, 2, 3], [0, 1])
    assert result.before.log_probability == pytest.approx(
        float(class_log_probabilities(classifier, prepared)[0]), abs=ATOL)
    assert np.all(result.after.record.weights[:, :, 0, [1, 2, 3]] == 0.0)
    assert result.change != 0.0
    with pytest.raises(ValueError, match="not one of the classifier's 3"):
        ablation.class_target(labels, 3)
