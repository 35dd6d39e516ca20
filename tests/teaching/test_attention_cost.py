"""The n² cost: the chapter's FLOP count against a count made one operation at a time, and the
measurement's memory against the arithmetic."""

from __future__ import annotations

import pytest

from models.teaching.attention_cost import COST_LENGTHS
from models.teaching.attention_cost import (BERT_BASE, MINILM, LayerShape, attention_bytes,
                                            crossover_tokens, flop_count, linear_bytes, measure,
                                            measure_length)

TINY = LayerShape("tiny", width=6, heads=3, feed_forward=10)


def linear_by_hand(tokens: int, inputs: int, outputs: int) -> int:
    """A (T, inputs) @ (inputs, outputs) product: each output adds `inputs` products."""
    operations = 0
    for _ in range(tokens):
        for _ in range(outputs):
            for _ in range(inputs):
                operations += 2  # one multiplication, one addition
    return operations


def attention_by_hand(tokens: int, heads: int, head_width: int) -> tuple[int, int, int]:
    scores = softmax = weighted = 0
    for _ in range(heads):
        for _ in range(tokens):  # each query
            for _ in range(tokens):  # each key: one dot product
                for _ in range(head_width):
                    scores += 2
            for _ in range(tokens):  # each weight: an exponential, added to the sum, divided
                softmax += 3
            for _ in range(head_width):  # each output number: a sum over the keys
                for _ in range(tokens):
                    weighted += 2
    return scores, softmax, weighted


@pytest.mark.parametrize("tokens", [1, 2, 5, 9])
def test_the_chapters_count_matches_a_count_made_one_operation_at_a_time(tokens):
    count = flop_count(tokens, TINY)
    d, f = TINY.width, TINY.feed_forward
    assert count.projections == 3 * linear_by_hand(tokens, d, d)
    assert count.output == linear_by_hand(tokens, d, d)
    assert count.feed_forward == linear_by_hand(tokens, d, f) + linear_by_hand(tokens, f, d)
    scores, softmax, weighted = attention_by_hand(tokens, TINY.heads, TINY.head_width)
    assert (count.scores, count.softmax, count.weighted_sum) == (scores, softmax, weighted)
    assert count.total == count.quadratic + count.linear


@pytest.mark.parametrize("shape", [TINY, MINILM, BERT_BASE])
def test_the_crossover_is_the_first_length_where_the_square_part_costs_more(shape):
    at = crossover_tokens(shape)
    assert flop_count(at, shape).quadratic > flop_count(at, shape).linear
    assert flop_count(at - 1, shape).quadratic <= flop_count(at - 1, shape).linear


def test_doubling_the_length_quadruples_the_square_part_and_doubles_the_rest():
    short, long = flop_count(256, MINILM), flop_count(512, MINILM)
    assert long.quadratic == 4 * short.quadratic
    assert long.linear == 2 * short.linear


def test_the_measurement_allocates_what_the_arithmetic_says():
    timing = measure_length(24, TINY, repeats=1)
    assert timing.attention_bytes == attention_bytes(24, TINY) == 2 * 3 * 24 * 24 * 4
    assert timing.linear_bytes == linear_bytes(24, TINY)
    assert min(timing.projections_s, timing.attention_s, timing.feed_forward_s) > 0


def test_measuring_reports_progress_and_refuses_lengths_past_the_budget():
    seen = []
    result = measure(TINY, (4, 8), repeats=1, progress=lambda done, total: seen.append(done))
    assert seen == [1, 2] and [t.tokens for t in result.timings] == [4, 8]
    with pytest.raises(ValueError, match="between 1 and"):
        measure(TINY, (max(COST_LENGTHS) * 2,))
