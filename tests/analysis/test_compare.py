"""Comparing two inputs: the ranking by roles that a long input gets (from each input's Roles
and Statistics reducers) is compare_heads' ranking whenever the lengths differ."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from models.analysis.compare import compare_heads, compare_role_tables, jensen_shannon_bits
from models.analysis.reducer import reduce_record
from models.analysis.roles import Roles, role_distribution
from models.analysis.statistics import Statistics

REPEATS = "the cat saw the dog , and the dog saw the cat near the old mill ."


def test_role_tables_rank_like_compare_heads(encoder_runner):
    first = encoder_runner.run(REPEATS, "a cat , a dog .").record
    other = encoder_runner.run("Birds sing loudly .").record
    assert other.num_tokens != first.num_tokens
    (roles_first, stats_first), (roles_other, stats_other) = (
        reduce_record(record, Roles(), Statistics()) for record in (first, other))
    labels = [stats.table()["label"] for stats in (stats_first, stats_other)]
    table = compare_role_tables(roles_first.of(), roles_other.of(), *labels)
    expected = compare_heads(first, other)
    assert list(table.columns) == ["rank", "layer", "head", "difference", "role_jsd",
                                   "label_first", "label_second"]
    pd.testing.assert_frame_equal(table, expected, check_exact=False, rtol=0, atol=1e-5)
    assert table["difference"].is_monotonic_decreasing and table["difference"].iloc[0] > 0.01
    # the lengths match: compare_heads still ranks by the position-aligned difference
    same = compare_heads(first, first)
    assert "aligned_jsd" in same and np.allclose(same["difference"], same["aligned_jsd"])
    with pytest.raises(ValueError):
        compare_role_tables(roles_first.of()[1:], roles_other.of(), *labels)
    with pytest.raises(ValueError, match="head labels"):
        compare_role_tables(roles_first.of(), roles_other.of(), labels[0][1:], labels[1])
    jsd = jensen_shannon_bits(role_distribution(first), role_distribution(other))
    assert table.set_index(["layer", "head"]).loc[(0, 0), "role_jsd"] == pytest.approx(jsd[0, 0])
