"""Activation patching (models/experiments/patching.py): the two runs it lies between are
reproduced exactly, every batched grid equals its cells patched one forward at a time through
the hook engine's own edits, the CSV holds the grid, and what a user can get wrong is refused
in one sentence before anything long runs."""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pytest

from models.experiments import contrast, patching, patching_cost, targets
from models.hooks import points
from tests.interventions.support import CAPITAL, experiment, one_cell, one_sentence

MODELS = ("tiny_gpt2", "tiny_bert", "decoder_runner")


@pytest.mark.parametrize("name", MODELS)
def test_patching_every_position_of_layer_0s_input_gives_the_clean_run_exactly(request, name):
    found = experiment(request, name)
    base = patching.baseline(found.loaded, found.pair, found.difference)
    value = patching.patched_difference(found.loaded, found.pair, found.difference,
                                        points.resid_pre(0))
    assert value == base.clean_metric
    assert base.normalised(value) == 1.0
    assert base.corrupted_metric != base.clean_metric


@pytest.mark.parametrize("name", MODELS)
def test_patching_nothing_gives_the_corrupted_run_exactly(request, name):
    found = experiment(request, name)
    base = patching.baseline(found.loaded, found.pair, found.difference)
    for point in (points.resid_pre(0), points.resid_pre(1), points.z(1)):
        value = patching.patched_difference(found.loaded, found.pair, found.difference, point,
                                            positions=[])
        assert value == base.corrupted_metric
        assert base.normalised(value) == 0.0


def _cells(grid: patching.PatchingGrid):
    """(row, column, layer, position, head) of every cell of a grid."""
    for row, column in np.ndindex(grid.raw.shape):
        if grid.site == patching.HEAD_POSITION:
            yield row, column, grid.layer, column, row
        elif grid.by_position:
            yield row, column, row, column, None
        else:
            yield row, column, row, None, column


@pytest.mark.parametrize("name", ("tiny_gpt2", "tiny_bert"))
@pytest.mark.parametrize("site", patching.SITES)
def test_every_cell_of_a_tiny_models_grid_is_that_cell_patched_alone(request, name, site):
    found = experiment(request, name)
    grid = patching.patching_grid(found.loaded, found.pair, found.difference, site, layer=1,
                                  batch_size=5)  # batches that span layers
    # the cells that put back what is there already (below) take no forward
    assert 0 < grid.forwards <= math.ceil(grid.raw.size / 5)
    for row, column, layer, position, head in _cells(grid):
        expected = one_cell(found, site, layer, position, head)
        assert grid.raw[row, column] == pytest.approx(expected, abs=1e-5), (row, column)


# SmolLM2 (30 layers, 9 query heads sharing 3 key/value heads), on a 5-token pair: every site,
# a few cells each (the first and last layers, the position where the prompts differ, the last).
SMOLLM2_CELLS = {
    patching.RESID_PRE: ((0, 3), (0, 4), (17, 3), (29, 4)),
    patching.ATTN_OUT: ((0, 3), (14, 4), (29, 4)),
    patching.MLP_OUT: ((0, 3), (14, 3), (29, 4)),
    patching.HEAD: ((0, 0), (20, 3), (29, 8)),
    patching.HEAD_POSITION: ((1, 3), (4, 4), (8, 0)),
    patching.HEAD_PATTERN: ((20, 3), (29, 1)),
    patching.HEAD_VALUES: ((20, 3), (29, 1), (10, 5)),
}
SMOLLM2_LAYER = 20  # head_position's layer


@pytest.mark.parametrize("site", patching.SITES)
def test_smollm2_grids_match_cells_patched_alone(request, site):
    found = experiment(request, "decoder_runner", CAPITAL)
    grid = patching.patching_grid(found.loaded, found.pair, found.difference, site,
                                  layer=SMOLLM2_LAYER)
    rows = 9 if site == patching.HEAD_POSITION else 30
    columns = 5 if grid.by_position else 9
    assert grid.raw.shape == (rows, columns)
    assert grid.forwards < grid.raw.size  # batched: several cells share a forward
    scale = max(1.0, abs(grid.clean_metric), abs(grid.corrupted_metric))
    cells = {(row, column): (layer, position, head)
             for row, column, layer, position, head in _cells(grid)}
    for row, column in SMOLLM2_CELLS[site]:
        expected = one_cell(found, site, *cells[row, column])
        assert grid.raw[row, column] == pytest.approx(expected, abs=1e-5 * scale), (row, column)
    assert np.isfinite(grid.values).all()


def test_a_head_grid_is_its_head_by_position_cells_at_once_where_one_position_differs(request):
    """The tokens before the one where the prompts differ are the same in both runs, so in a
    causal model a head's output differs only from that position on: patching a head at every
    position is patching it at the positions after."""
    found = experiment(request, "tiny_gpt2")
    base = patching.baseline(found.loaded, found.pair, found.difference, [points.z(1)])
    differs = int(np.flatnonzero((base.clean[points.z(1)] - base.corrupted[points.z(1)]).abs()
                                 .sum(dim=(1, 2)).numpy() > 0)[0])
    assert found.pair.clean.tokens[:differs] == found.pair.corrupted.tokens[:differs]
    whole = patching.patching_grid(found.loaded, found.pair, found.difference, patching.HEAD)
    for head in range(whole.raw.shape[1]):
        later = patching.patched_difference(found.loaded, found.pair, found.difference,
                                            points.z(1), positions=range(differs, 13),
                                            heads=[head])
        assert whole.raw[1, head] == pytest.approx(later, abs=1e-5)


@pytest.mark.parametrize("site", (patching.RESID_PRE, patching.MLP_OUT, patching.HEAD_POSITION))
def test_cells_before_the_first_token_that_differs_take_no_forward(request, site):
    """In a causal model the positions before the first token where the prompts differ are the
    same in both runs at every layer, so patching one of them puts back what is there: the grid
    gives those cells the corrupted run's value without a forward, runs the others in batches,
    and each agrees with that cell patched by itself in a forward of its own."""
    found = experiment(request, "decoder_runner", CAPITAL)
    differs = next(index for index, (clean, corrupted) in enumerate(
        zip(found.pair.clean.tokens, found.pair.corrupted.tokens)) if clean != corrupted)
    assert differs == 3  # " France" / " Italy"
    heard = []
    grid = patching.patching_grid(found.loaded, found.pair, found.difference, site,
                                  layer=SMOLLM2_LAYER, batch_size=7,
                                  progress=lambda done, total: heard.append((done, total)))
    rows = grid.raw.shape[0]
    assert (grid.raw[:, :differs] == grid.corrupted_metric).all()
    assert (grid.raw[:, differs:] != grid.corrupted_metric).any()
    assert grid.forwards == math.ceil(rows * (5 - differs) / 7)
    assert heard[-1] == (grid.raw.size, grid.raw.size) and heard == sorted(heard)
    scale = max(1.0, abs(grid.clean_metric), abs(grid.corrupted_metric))
    for row, column in ((0, 0), (rows - 1, differs - 1), (rows // 2, differs), (1, 4)):
        layer, head = (SMOLLM2_LAYER, row) if site == patching.HEAD_POSITION else (row, None)
        expected = one_cell(found, site, layer, column, head)
        assert grid.raw[row, column] == pytest.approx(expected, abs=1e-5 * scale), (row, column)


def test_the_csv_holds_one_row_per_cell_with_normalised_values(request):
    found = experiment(request, "tiny_gpt2")
    for site, header in ((patching.RESID_PRE, ["layer", "position", "token", "value"]),
                         (patching.HEAD, ["layer", "head", "value"]),
                         (patching.HEAD_POSITION,
                          ["layer", "head", "position", "token", "value"])):
        grid = patching.patching_grid(found.loaded, found.pair, found.difference, site, layer=0)
        rows = list(csv.DictReader(io.StringIO(grid.csv_text())))
        assert list(rows[0]) == header and len(rows) == grid.raw.size
        normalised = (grid.raw - grid.corrupted_metric) / (grid.clean_metric -
                                                           grid.corrupted_metric)
        for row in rows:
            if site == patching.HEAD_POSITION:
                cell = (int(row["head"]), int(row["position"]))
                assert int(row["layer"]) == 0
            elif site == patching.RESID_PRE:
                cell = (int(row["layer"]), int(row["position"]))
            else:
                cell = (int(row["layer"]), int(row["head"]))
            assert float(row["value"]) == pytest.approx(float(normalised[cell]), abs=1e-12)
            if "token" in row:
                assert row["token"] == found.loaded.tokenizer.decode(
                    [int(found.pair.clean.encoded.input_ids[0, int(row["position"])])])
    assert grid.texts[1] == " cat"


# --- refused, in one sentence ------------------------------------------------------------------

def refusal(call) -> str:
    with pytest.raises(ValueError) as raised:
        call()
    message = str(raised.value)
    assert one_sentence(message), message
    return message


def test_prompts_of_different_lengths_are_refused_with_both_tokenizations(decoder_runner):
    with pytest.raises(contrast.PromptLengths) as raised:
        contrast.prompt_pair(decoder_runner, "When Mary and John went to the store",
                             "When Mary and John went to the big old store")
    message = str(raised.value)
    assert one_sentence(message)
    assert "2 tokens more than the clean one (10 against 8)" in message
    assert raised.value.clean[-1] == "Ġstore" and raised.value.corrupted[-3:] == (
        "Ġbig", "Ġold", "Ġstore")


def test_what_a_user_can_get_wrong_is_one_sentence(decoder_runner, tiny_bert, encoder_runner):
    decoder = decoder_runner
    pair = contrast.prompt_pair(decoder, "The capital of France is", "The capital of Italy is")
    assert "clean prompt is empty" in refusal(
        lambda: contrast.prompt_pair(decoder, "  ", "The capital of Italy is"))
    assert "corrupted prompt is empty" in refusal(
        lambda: contrast.prompt_pair(decoder, "The capital of Italy is", ""))
    assert "same token" in refusal(
        lambda: contrast.logit_difference(decoder, pair.clean, "Paris", " Paris"))
    assert "is 2 tokens for this model" in refusal(
        lambda: contrast.logit_difference(decoder, pair.clean, "Eiffel", "Rome"))
    assert "wrong token is empty" in refusal(
        lambda: contrast.logit_difference(decoder, pair.clean, "Paris", ""))
    same = contrast.prompt_pair(decoder, "The capital of France is", "The capital of France is")
    difference = contrast.logit_difference(decoder, same.clean, "Paris", "Rome")
    assert "same logit difference" in refusal(
        lambda: patching.patching_grid(decoder, same, difference, patching.HEAD))
    difference = contrast.logit_difference(decoder, pair.clean, "Paris", "Rome")
    assert "Choose a layer between 0 and 29" in refusal(
        lambda: patching.patching_grid(decoder, pair, difference, patching.HEAD_POSITION))
    assert "not a patching site" in refusal(
        lambda: patching.patching_grid(decoder, pair, difference, "everything"))
    with pytest.raises(targets.NoPrediction) as raised:
        contrast.language_model(encoder_runner)
    assert str(raised.value) == targets.no_prediction_message(encoder_runner.label)
    unmasked = contrast.prompt_pair(tiny_bert, "the cat sat like a banana .",
                                    "the cat flies like a banana .")
    assert "has no [MASK]" in refusal(
        lambda: contrast.logit_difference(tiny_bert, unmasked.clean, "cat", "banana"))
    moved = contrast.prompt_pair(tiny_bert, "the [MASK] sat like a cat .",
                                 "the cat sat like a [MASK] .")
    assert "same place in both" in refusal(lambda: contrast.logit_difference(
        tiny_bert, moved.clean, "cat", "banana", moved.corrupted))


def test_a_grid_beyond_the_byte_budget_is_refused_before_anything_runs(decoder_runner,
                                                                        monkeypatch):
    long_clean, long_corrupted = "one two " * 150, "two one " * 150
    pair = contrast.prompt_pair(decoder_runner, long_clean, long_corrupted)
    difference = contrast.logit_difference(decoder_runner, pair.clean, "one", "two")

    def no_forward(*args, **kwargs):
        raise AssertionError("a refused grid ran a forward")

    monkeypatch.setattr(patching, "run_model", no_forward)
    message = refusal(lambda: patching.patching_grid(decoder_runner, pair, difference,
                                                     patching.RESID_PRE))
    cost = patching_cost.item_bytes(decoder_runner.model, pair.num_tokens, 1)
    assert f"{30 * pair.num_tokens:,} cells at {pair.num_tokens} tokens" in message
    assert f"{30 * pair.num_tokens * cost / 2**30:.1f} GB" in message
    assert "GB a patching run may take" in message
    with pytest.raises(patching_cost.PatchingTooLarge):
        patching_cost.grid_cost(decoder_runner, pair, 30 * pair.num_tokens)
