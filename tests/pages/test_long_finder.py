"""The head finder on a long decoder input: the query's rows of every layer are computed from the
layers' kept inputs, and the heads it ranks score what the full forward's maps give them."""

from __future__ import annotations

import types

import numpy as np
import pytest

from models.analysis.head_finder import (every_position, locate, query_to_keys, rows_to_keys,
                                  strongest_in_rows, strongest_keys)
from models.hooks.long_rows import rows_every_layer
from models.hooks.record import AttentionRecord
from models.hooks.streaming import stream
from tests.app_support import array, figures, run_page, texts
from tests.long_support import full_record
from viz.labels import display_tokens

WORDS = ("time flies like an arrow , fruit flies like a banana . " * 400).split()
# More tokens than the decoder's full trace keeps (352); the words asked about come after them.
LONG_TEXT = " ".join(WORDS[:420]) + " Mario is short, but he can jump over the armadillo."
DECODER = {"sb_kind": "decoder"}


@pytest.fixture(scope="module")
def long_record(decoder_runner) -> AttentionRecord:
    """The long text's record from the model's own forward with output_attentions."""
    return full_record(decoder_runner, LONG_TEXT)


def test_the_row_based_scores_are_the_record_based_ones(long_record):
    weights = long_record.weights  # (L, H, Q, K)
    tokens_only = types.SimpleNamespace(tokens=long_record.tokens)
    for query_word, key_words in (("he", ["Mario"]), ("armadillo", ["he", "jump"]),
                                  ("flies", ["time", "arrow"])):
        query = locate(tokens_only, query_word)
        assert query == locate(long_record, query_word)
        keys = every_position(tokens_only, key_words)
        assert keys == every_position(long_record, key_words)
        rows = weights[:, :, query.start:query.stop]  # (L, H, W, K)
        scores = rows_to_keys(rows, keys)
        np.testing.assert_array_equal(scores, query_to_keys(long_record, query.positions, keys))
        np.testing.assert_array_equal(strongest_in_rows(rows),
                                      strongest_keys(long_record, query.positions))
        by_hand = weights[:, :, query.start:query.stop][..., list(keys)].sum(-1).mean(-1)
        np.testing.assert_allclose(scores, by_hand, rtol=1e-5, atol=1e-5)
    assert locate(tokens_only, "armadillo").positions == (430, 431, 432)  # three pieces
    with pytest.raises(ValueError, match="Choose a query token"):
        rows_to_keys(weights[:, :, 5:5], (1,))
    with pytest.raises(ValueError, match="at least one key"):
        rows_to_keys(weights[:, :, 5:6], ())


def test_every_layers_rows_of_a_word_are_the_full_forwards_rows(decoder_runner, long_record,
                                                                 tmp_path):
    streamed = stream(decoder_runner, LONG_TEXT, None, lambda layer, maps: None,
                      keep_inputs=tmp_path / "inputs")
    try:
        query = locate(streamed, "armadillo")
        heard = []
        rows = rows_every_layer(decoder_runner, streamed.encoded, range(query.start, query.stop),
                                streamed.layer_inputs, progress=lambda *done: heard.append(done))
        assert rows.dtype == np.float32
        assert rows.shape == (long_record.num_layers, long_record.num_heads, 3,
                              long_record.num_tokens)
        assert heard == [(layer, long_record.num_layers)
                         for layer in range(1, long_record.num_layers + 1)]
        # Float32 across two code paths (rows alone vs the whole layer): a few ulps apart.
        np.testing.assert_allclose(rows, long_record.weights[:, :, query.start:query.stop],
                                   rtol=0, atol=1e-5)
        with pytest.raises(ValueError, match="not within"):
            rows_every_layer(decoder_runner, streamed.encoded, range(430, 440),
                             streamed.layer_inputs)
    finally:
        streamed.layer_inputs.delete()


def test_the_page_ranks_heads_over_a_long_input_whole(long_record):
    at = run_page("head_finder", text=LONG_TEXT,
                  state={**DECODER, "sb_read_all": True, "finder_query": "he",
                         "finder_keys": "Mario"})
    assert not at.error
    query = locate(long_record, "he")
    assert query.start == 425 > 352
    expected = query_to_keys(long_record, query.positions, every_position(long_record, ["Mario"]))
    table = at.dataframe[0].value
    assert len(table) == long_record.num_layers * long_record.num_heads
    assert list(table["attention"]) == sorted(table["attention"], reverse=True)
    np.testing.assert_allclose(table["attention"],
                               expected[table["layer"].to_numpy(), table["head"].to_numpy()],
                               atol=1e-5)
    strongest = strongest_keys(long_record, query.positions)
    layer, head = int(table["layer"].iloc[0]), int(table["head"].iloc[0])
    words = display_tokens(long_record.tokens)  # the page names tokens as words
    assert table["strongest key"].iloc[0] == words[strongest[layer, head]]
    (grid,) = figures(at)
    np.testing.assert_allclose(array(grid["data"][0]["z"]), expected, atol=1e-5)
    shown = texts(at)
    assert "Query: 'he' at position 425" in shown and "Mario #420" in shown
    assert f"all {long_record.num_tokens:,} tokens" in shown
    assert "were dropped" not in shown  # the full trace (and its notice) never ran
    at.button(key=f"finder_open_{layer}_{head}").click().run()
    assert at.title[0].value == "Attention maps" and not at.error
    assert at.toggle(key="sb_read_all").value  # the head opens over the whole input too
    assert (at.slider(key="maps_layer").value, at.slider(key="maps_head").value) == (layer, head)


def test_a_query_word_that_recurs_is_read_at_its_first_occurrence(long_record):
    at = run_page("head_finder", text=LONG_TEXT,
                  state={**DECODER, "sb_read_all": True, "finder_query": "flies",
                         "finder_keys": "time"})
    table = at.dataframe[0].value
    expected = query_to_keys(long_record, (1,), every_position(long_record, ["time"]))
    np.testing.assert_allclose(table["attention"],
                               expected[table["layer"].to_numpy(), table["head"].to_numpy()],
                               atol=1e-5)
    occurrences = long_record.tokens.count("Ġflies")
    assert occurrences > 50
    assert f"occurs {occurrences} times" in texts(at) and "(position 1)" in texts(at)
    assert f"({len(every_position(long_record, ['time']))} positions in all)" in texts(at)
