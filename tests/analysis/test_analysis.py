"""Head statistics, rollout, word merging, hidden special tokens and comparison on hand-built
records whose answers are known."""

import io

import numpy as np
import pandas as pd
import pytest

from models.analysis.compare import aligned_divergence, compare_heads, jensen_shannon_bits
from models.analysis.roles import ROLES, role_distribution
from models.analysis.rollout import attention_rollout, record_rollout, residual_attention
from models.analysis.statistics import NUMERIC_COLUMNS, head_statistics
from models.analysis.token_batch import is_punctuation
from models.analysis.token_options import (apply_token_options, hide_special_tokens,
                                           merge_word_pieces, word_groups)
from models.hooks.record import AttentionRecord
from viz.compare import difference_heatmap, side_by_side
from viz.rollout import rollout_figures
from viz.statistics import statistic_heatmap, statistics_csv

TOKENS = ("[CLS]", "time", "flies", ".", "fast", "[SEP]")  # specials at 0 and 5, "." at 3
COUNT = len(TOKENS)


def one_hot_head(targets) -> np.ndarray:
    """(Q, K) map where query i puts all its weight on key targets[i]."""
    return np.eye(COUNT)[list(targets)]


def pattern_record() -> AttentionRecord:
    uniform = np.full((COUNT, COUNT), 1.0 / COUNT)
    heads = [
        one_hot_head([1, 0, 1, 2, 3, 4]),  # previous token (row 0 has none: it looks at 1)
        one_hot_head([1, 2, 3, 4, 5, 4]),  # next token (the last row looks back)
        np.eye(COUNT),  # itself
        one_hot_head([5] * COUNT),  # [SEP] sink
        one_hot_head([0] * COUNT),  # [CLS] sink
        one_hot_head([3] * COUNT),  # the full stop
        uniform,  # broad
        0.45 * one_hot_head([0] * COUNT) + 0.45 * one_hot_head([5] * COUNT)
        + 0.1 * one_hot_head([3] * COUNT),  # mixed: [CLS], [SEP] and "." without a majority
    ]
    return AttentionRecord(tokens=TOKENS, weights=np.stack(heads)[None], source="hand",
                           special_positions=(0, COUNT - 1))


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return head_statistics(pattern_record())


def test_statistics_has_one_row_per_head_and_every_column(table):
    assert len(table) == 8
    assert list(table.columns[:3]) == ["layer", "head", "label"]
    assert set(NUMERIC_COLUMNS) <= set(table.columns)


def test_previous_token_head(table):
    row = table.iloc[0]
    assert row["label"] == "previous-token"
    assert row["previous"] == pytest.approx(1.0)
    assert row["mean_distance"] == pytest.approx(1.0)
    assert row["entropy_bits"] == pytest.approx(0.0)
    assert row["self"] == pytest.approx(0.0)
    assert row["next"] == pytest.approx(1 / 5)  # only row 0 of the 5 rows with a next token
    assert row["cls"] == pytest.approx(1 / COUNT)  # row 1 looks at [CLS]
    assert row["sep"] == pytest.approx(0.0)


def test_next_self_and_sink_heads(table):
    assert table.iloc[1]["label"] == "next-token"
    assert table.iloc[1]["next"] == pytest.approx(1.0)
    assert table.iloc[2]["label"] == "self"
    assert table.iloc[2]["self"] == pytest.approx(1.0)
    assert table.iloc[2]["mean_distance"] == pytest.approx(0.0)
    sep = table.iloc[3]
    assert sep["label"] == "[SEP] sink" and sep["sep"] == pytest.approx(1.0)
    assert sep["mean_distance"] == pytest.approx(np.mean([5, 4, 3, 2, 1, 0]))
    cls = table.iloc[4]
    assert cls["label"] == "[CLS] sink" and cls["cls"] == pytest.approx(1.0)
    assert cls["sep"] == pytest.approx(0.0)
    punctuation = table.iloc[5]
    assert punctuation["label"] == "punctuation"
    assert punctuation["punctuation"] == pytest.approx(1.0)


def test_uniform_head_is_broad_with_maximal_entropy(table):
    row = table.iloc[6]
    assert row["label"] == "broad"
    assert row["entropy_bits"] == pytest.approx(np.log2(COUNT))
    for column in ("cls", "sep", "punctuation", "self", "previous", "next"):
        assert row[column] == pytest.approx(1 / COUNT)
    distances = np.abs(np.subtract.outer(range(COUNT), range(COUNT)))
    assert row["mean_distance"] == pytest.approx(distances.mean())


def test_head_without_a_majority_is_mixed_with_its_entropy(table):
    row = table.iloc[7]
    assert row["label"] == "mixed"
    assert (row["cls"], row["sep"], row["punctuation"]) == pytest.approx((0.45, 0.45, 0.1))
    assert row["self"] == pytest.approx((0.45 + 0.1 + 0.45) / COUNT)  # rows 0, 3 and 5
    expected = -(2 * 0.45 * np.log2(0.45) + 0.1 * np.log2(0.1))
    assert row["entropy_bits"] == pytest.approx(expected)


def test_rows_emptied_by_a_mask_are_left_out_and_causal_uniform_is_broad():
    count = 8
    causal = np.tril(np.ones((count, count)))
    causal /= causal.sum(axis=-1, keepdims=True)
    causal[2] = 0.0  # a row a mask emptied
    live = [0, 1, 3, 4, 5, 6, 7]
    record = AttentionRecord(tokens=tuple("abcdefgh"), weights=causal[None, None],
                             source="hand", masks=("causal",))
    row = head_statistics(record).iloc[0]
    assert row["entropy_bits"] == pytest.approx(np.mean(np.log2(np.array(live) + 1.0)))
    assert row["self"] == pytest.approx(np.mean(1.0 / (np.array(live) + 1.0)))
    assert row["next"] == pytest.approx(0.0)
    assert row["label"] == "broad"


@pytest.mark.parametrize("token, expected", [
    (".", True), (",", True), ("##'", True), ("Ġ!", True), ("▁?", True),
    ("a", False), ("Ġ", False), ("3.5", False), ("[SEP]", False),
])
def test_punctuation_tokens(token, expected):
    assert is_punctuation(token) is expected


def test_statistic_heatmap_is_layers_by_heads(table):
    figure = statistic_heatmap(table, "previous")
    trace = figure.data[0]
    assert np.asarray(trace.z).shape == (1, 8)
    assert np.asarray(trace.z)[0, 0] == pytest.approx(1.0)
    assert figure.layout.yaxis.title.text == "layer" and figure.layout.xaxis.title.text == "head"
    assert trace.zmax == 1.0
    assert statistic_heatmap(table, "entropy_bits").data[0].zmax == pytest.approx(np.log2(COUNT))
    assert "layer: %{customdata[0]}" in trace.hovertemplate
    # cells fill the page's width, not squares (30 x 9 square cells were a strip whose head
    # labels overlapped)
    assert figure.layout.yaxis.scaleanchor is None and figure.layout.width is None
    with pytest.raises(ValueError):
        statistic_heatmap(table, "label")
    with pytest.raises(ValueError, match="norm_cls"):  # a table without the norm-based shares
        statistic_heatmap(table, "norm_cls")
    shares = table.assign(norm_cls=np.linspace(0.0, 0.7, len(table)))
    norm = statistic_heatmap(shares, "norm_cls").data[0]  # a share: on the 0-1 scale
    np.testing.assert_allclose(np.asarray(norm.z)[0], np.linspace(0.0, 0.7, len(table)))
    assert norm.zmax == 1.0


def test_csv_round_trips(table):
    data = statistics_csv(table)
    back = pd.read_csv(io.BytesIO(data))
    assert data.decode("utf-8").splitlines()[0].startswith("layer,head,label,entropy_bits")
    assert len(back) == 8 and list(back["label"]) == list(table["label"])
    np.testing.assert_allclose(back["previous"], table["previous"], rtol=1e-5)


def two_layer_record() -> AttentionRecord:
    layer0 = np.stack([[[1.0, 0.0], [1.0, 0.0]], [[0.0, 1.0], [0.0, 1.0]]])  # mean: all 0.5
    layer1 = np.stack([[[0.0, 1.0], [0.0, 1.0]], [[0.0, 1.0], [0.0, 1.0]]])  # mean: all on key 1
    return AttentionRecord(tokens=("a", "b"), weights=np.stack([layer0, layer1]), source="hand")


def test_rollout_matches_a_hand_computation():
    record = two_layer_record()
    # (A0 + I) / 2 = [[.75, .25], [.25, .75]];  (A1 + I) / 2 = [[.5, .5], [0, 1]]
    np.testing.assert_allclose(residual_attention(record)[1], [[0.5, 0.5], [0.0, 1.0]])
    rollout = attention_rollout(record)
    assert rollout.shape == (2, 2, 2)
    np.testing.assert_allclose(rollout[0], [[0.75, 0.25], [0.25, 0.75]])
    # [[.5, .5], [0, 1]] @ rollout[0]
    np.testing.assert_allclose(rollout[1], [[0.5, 0.5], [0.25, 0.75]])


def test_rollout_rows_sum_to_one_and_figures_show_both_maps():
    rng = np.random.default_rng(3)
    weights = rng.random((3, 4, 5, 5))
    weights /= weights.sum(axis=-1, keepdims=True)
    record = AttentionRecord(tokens=tuple("abcde"), weights=weights, source="random")
    rollout = attention_rollout(record)
    np.testing.assert_allclose(rollout.sum(axis=-1), 1.0, atol=1e-9)
    raw, rolled = rollout_figures(*record_rollout(record).exact(2), record.tokens, 2)
    np.testing.assert_allclose(raw.data[0].z, weights[2].mean(axis=0), atol=1e-5)
    np.testing.assert_allclose(rolled.data[0].z, rollout[2])
    assert "layers 0 to 2" in rolled.layout.title.text


def random_rows(shape, seed=0) -> np.ndarray:
    weights = np.random.default_rng(seed).random(shape)
    return weights / weights.sum(axis=-1, keepdims=True)


def test_merge_word_pieces_sums_keys_and_averages_queries():
    tokens = ("[CLS]", "play", "##ing", "fast", "[SEP]")
    weights = random_rows((2, 3, 5, 5))
    record = AttentionRecord(tokens=tokens, weights=weights, source="hand",
                             special_positions=(0, 4))
    merged = merge_word_pieces(record)
    assert merged.tokens == ("[CLS]", "playing", "fast", "[SEP]")
    assert merged.special_positions == (0, 3)
    w = weights[1, 2]
    playing_to_playing = ((w[1, 1] + w[1, 2]) + (w[2, 1] + w[2, 2])) / 2
    assert merged.weights[1, 2, 1, 1] == pytest.approx(playing_to_playing)
    assert merged.weights[1, 2, 0, 1] == pytest.approx(w[0, 1] + w[0, 2])
    assert merged.weights[1, 2, 1, 3] == pytest.approx((w[1, 4] + w[2, 4]) / 2)
    assert merged.weights[1, 2, 3, 2] == pytest.approx(w[4, 3])
    np.testing.assert_allclose(merged.weights.sum(axis=-1), 1.0, atol=1e-5)


def test_merge_leaves_rows_a_mask_emptied_out_of_the_mean():
    rows = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 0.0], [0.2, 0.2, 0.6]])  # piece "##b" emptied
    record = AttentionRecord(tokens=("a", "##b", "c"), weights=rows[None, None], source="hand",
                             masks=("padding",))
    merged = merge_word_pieces(record)
    np.testing.assert_allclose(merged.weights[0, 0], [[1.0, 0.0], [0.4, 0.6]])


def test_word_boundaries_for_bpe_sentencepiece_and_pairs():
    def groups(tokens, special=(), segments=()):
        weights = np.full((1, 1, len(tokens), len(tokens)), 1.0 / len(tokens))
        return word_groups(AttentionRecord(tokens=tokens, weights=weights, source="hand",
                                           special_positions=special, segment_ids=segments))

    bpe = ("<s>", "Time", "Ġfl", "ies", "Ġlike", "</s>")
    assert groups(bpe, (0, 5)) == [[0], [1], [2, 3], [4], [5]]
    assert groups(("<s>", "▁fl", "ies", "▁like"), (0,)) == [[0], [1, 2], [3]]
    wordpiece = ("[CLS]", "##a", "b", "##c", "[SEP]", "##d")
    assert groups(wordpiece, (0, 4)) == [[0], [1], [2, 3], [4], [5]]
    # a word never crosses into the second sentence, even with no special token between
    assert groups(("a", "Ġb", "c", "Ġd"), (), (0, 0, 1, 1)) == [[0], [1], [2], [3]]


def test_merge_keeps_segments_and_causal_zeros():
    tokens = ("[CLS]", "a", "##b", "[SEP]", "c", "##d", "[SEP]")
    weights = np.tril(random_rows((1, 2, 7, 7), seed=1))
    weights /= weights.sum(axis=-1, keepdims=True)
    record = AttentionRecord(tokens=tokens, weights=weights, source="hand", masks=("causal",),
                             segment_ids=(0, 0, 0, 0, 1, 1, 1), special_positions=(0, 3, 6))
    merged = merge_word_pieces(record)
    assert merged.tokens == ("[CLS]", "ab", "[SEP]", "cd", "[SEP]")
    assert merged.segment_ids == (0, 0, 0, 1, 1)
    assert merged.special_positions == (0, 2, 4)
    assert np.all(np.triu(merged.weights, k=1) == 0)
    assert merge_word_pieces(merged) is merged  # nothing left to merge


def test_hide_special_tokens_renormalises_and_reports_emptied_rows():
    rows = np.array([
        [0.4, 0.3, 0.2, 0.1],  # [CLS]: dropped
        [0.5, 0.25, 0.25, 0.0],  # a: 0.25 / 0.25 -> 0.5 / 0.5
        [0.6, 0.0, 0.0, 0.4],  # b: all its weight is on special tokens
        [0.0, 0.0, 0.0, 1.0],  # [SEP]: dropped
    ])
    record = AttentionRecord(tokens=("[CLS]", "a", "b", "[SEP]"), weights=rows[None, None],
                             source="hand", special_positions=(0, 3), segment_ids=(0, 0, 1, 1))
    hidden = hide_special_tokens(record)
    assert hidden.record.tokens == ("a", "b")
    assert hidden.record.segment_ids == (0, 1)
    assert hidden.record.special_positions == ()
    np.testing.assert_allclose(hidden.record.weights[0, 0], [[0.5, 0.5], [0.0, 0.0]])
    assert hidden.emptied_rows == 1 and hidden.total_rows == 2
    assert hidden.hidden_tokens == ("[CLS]", "[SEP]")
    assert "1 of 2 rows" in hidden.notice and "[CLS], [SEP]" in hidden.notice


def test_hide_without_special_tokens_changes_nothing():
    record = AttentionRecord(tokens=("a", "b"), weights=np.full((1, 1, 2, 2), 0.5), source="hand")
    hidden = hide_special_tokens(record)
    assert hidden.record is record and hidden.emptied_rows == 0
    assert "no special tokens" in hidden.notice


def test_token_options_merge_then_hide():
    tokens = ("[CLS]", "play", "##ing", "fast", "[SEP]")
    record = AttentionRecord(tokens=tokens, weights=random_rows((1, 2, 5, 5), seed=2),
                             source="hand", special_positions=(0, 4))
    view = apply_token_options(record, merge_words=True, hide_special=True)
    assert view.record.tokens == ("playing", "fast")
    np.testing.assert_allclose(view.record.weights.sum(axis=-1), 1.0, atol=1e-5)
    assert len(view.notes) == 2 and "mean of its pieces' rows" in view.notes[0]
    assert apply_token_options(record, False, False).record is record


def test_jensen_shannon_bounds():
    assert jensen_shannon_bits(np.array([0.2, 0.8]), np.array([0.2, 0.8])) == pytest.approx(0.0)
    assert jensen_shannon_bits(np.array([1.0, 0.0]), np.array([0.0, 1.0])) == pytest.approx(1.0)


def test_compare_ranks_the_changed_head_first_when_lengths_match():
    first = pattern_record()
    changed = first.weights.copy()
    changed[0, 5] = one_hot_head([4, 3, 2, 1, 0, 0])  # punctuation head turned into a mirror
    changed[0, 7] = first.weights[0, 7] * 0.9 + first.weights[0, 6] * 0.1  # a little changed
    second = AttentionRecord(tokens=("[CLS]", "fruit", "flies", ",", "too", "[SEP]"),
                             weights=changed, source="hand", special_positions=(0, 5))
    table = compare_heads(first, second)
    assert (table["layer"].iloc[0], table["head"].iloc[0]) == (0, 5)
    assert table["rank"].tolist() == list(range(1, 9))
    assert (table["layer"].iloc[1], table["head"].iloc[1]) == (0, 7)
    assert table["difference"].iloc[2:].max() == pytest.approx(0.0, abs=1e-6)
    assert table["difference"].iloc[0] > 0.8
    assert table["label_first"].iloc[0] == "punctuation"
    np.testing.assert_allclose(table["difference"], table["aligned_jsd"])
    np.testing.assert_allclose(aligned_divergence(first, first), 0.0, atol=1e-5)
    grid = difference_heatmap(table).data[0]
    assert np.asarray(grid.z).shape == (1, 8)
    assert grid.zmax == pytest.approx(table["difference"].max())


def test_compare_uses_roles_across_different_lengths():
    def record(count, heads):
        tokens = ("[CLS]",) + tuple(f"w{i}" for i in range(count - 2)) + ("[SEP]",)
        return AttentionRecord(tokens=tokens, weights=np.stack(heads)[None], source="hand",
                               special_positions=(0, count - 1))

    previous = lambda n: np.eye(n)[[1] + list(range(n - 1))]  # noqa: E731
    sink = lambda n: np.eye(n)[[n - 1] * n]  # noqa: E731
    short, long = record(5, [previous(5), previous(5)]), record(8, [previous(8), sink(8)])
    roles = role_distribution(long)
    np.testing.assert_allclose(roles.sum(axis=-1), 1.0)
    assert roles[0, 1, ROLES.index("other special")] == pytest.approx(1.0)
    table = compare_heads(short, long)
    assert "aligned_jsd" not in table.columns
    assert (table["layer"].iloc[0], table["head"].iloc[0]) == (0, 1)
    assert table["difference"].iloc[1] < 0.1
    with pytest.raises(ValueError):
        aligned_divergence(short, long)
    first_map, second_map = side_by_side(short, long, 0, 1)
    assert np.asarray(first_map.data[0].z).shape == (5, 5)
    assert np.asarray(second_map.data[0].z).shape == (8, 8)


def test_compare_rejects_models_of_different_shapes():
    one = AttentionRecord(tokens=("a",), weights=np.ones((1, 1, 1, 1)), source="hand")
    two = AttentionRecord(tokens=("a",), weights=np.ones((1, 2, 1, 1)) / 1.0, source="hand")
    with pytest.raises(ValueError):
        compare_heads(one, two)


def test_first_token_share_labels_a_decoder_sink_without_special_tokens():
    """A causal record with no special tokens: the cls column is 0, the first-token share is
    what a sink head gives to token 0, and the head is labelled a first-token sink."""
    count = 6
    weights = np.zeros((1, 2, count, count), dtype=np.float32)
    weights[0, 0, :, 0] = 1.0  # head 0: everything on the first token
    weights[0, 1] = np.tril(np.ones((count, count))) / np.arange(1, count + 1)[:, None]  # even
    record = AttentionRecord(tokens=tuple("abcdef"), weights=weights, source="toy",
                             masks=("causal",))
    table = head_statistics(record)
    assert table.loc[0, "first"] == pytest.approx(1.0) and table.loc[0, "cls"] == 0.0
    assert table.loc[0, "label"] == "first-token sink"
    expected = np.mean([1 / (i + 1) for i in range(count)])
    assert table.loc[1, "first"] == pytest.approx(expected, rel=1e-5)
