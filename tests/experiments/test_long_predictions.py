"""A long decoder text's predictions, from its last layer's kept input with the head run a chunk
of positions at a time, equal the predictions of the model's own forward over the whole text;
the predictions page reads such a text whole."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.experiments.long_predictions import chunk_bounds, language_model_head, long_predictions
from models.experiments.predictions import readable
from models.hooks.streaming import prepare, stream
from models.limits import EXACT_MAP_TOKENS
from tests.app_support import array, figures, run_page, texts
from viz.generation import visible_text

WORDS = ("time flies like an arrow , fruit flies like a banana . " * 400).split()
# More tokens than the decoder's full trace keeps (352) and than a list of positions shows
LONG_TEXT = " ".join(WORDS[:EXACT_MAP_TOKENS + 40])
DECODER = {"sb_kind": "decoder"}
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def reference(decoder_runner):
    """The long text's tokens and the log-probabilities of the model's own forward (T, V)."""
    encoded, inputs = prepare(decoder_runner, LONG_TEXT, None)
    assert len(encoded.tokens) > decoder_runner.max_tokens
    with torch.inference_mode():
        logits = decoder_runner.model(**inputs, use_cache=False).logits[0]  # (T, V)
    return encoded, torch.log_softmax(logits.float(), dim=-1)


@pytest.fixture(scope="module")
def kept(decoder_runner, tmp_path_factory):
    """Every layer's input of the long text, from one streamed forward."""
    streamed = stream(decoder_runner, LONG_TEXT, None, lambda layer, maps: None,
                      keep_inputs=tmp_path_factory.mktemp("long-predictions") / "kept")
    yield streamed
    streamed.layer_inputs.delete()


def expected_top(log_probabilities: torch.Tensor, row: int, k: int = 10):
    values, ids = log_probabilities[row].topk(k)
    return ids.tolist(), values.exp().numpy()


@pytest.mark.parametrize("chunk", [256, 37])
def test_long_predictions_equal_the_full_forwards(decoder_runner, reference, kept, chunk):
    encoded, log_probabilities = reference
    assert kept.encoded.tokens == encoded.tokens
    predictions = long_predictions(decoder_runner, kept.encoded, kept.layer_inputs, chunk=chunk)
    count = len(encoded.tokens)
    ids = encoded.input_ids[0]

    top_ids, top_probabilities = expected_top(log_probabilities, count - 1)
    assert [c.token_id for c in predictions.next_token.candidates] == top_ids
    np.testing.assert_allclose([c.probability for c in predictions.next_token.candidates],
                               top_probabilities, atol=TOLERANCE)

    positions = predictions.positions.positions
    assert [p.position for p in positions] == list(range(count - 1))
    actual = log_probabilities[:-1].gather(1, ids[1:, None])[:, 0]  # (T-1,)
    assert [p.actual.token_id for p in positions] == ids[1:].tolist()
    np.testing.assert_allclose([p.loss_nats for p in positions], -actual.numpy(), atol=TOLERANCE)
    np.testing.assert_allclose([p.actual.probability for p in positions], actual.exp().numpy(),
                               atol=TOLERANCE)
    values, top = log_probabilities[:-1].topk(10, dim=-1)  # (T-1, 10)
    assert [[c.token_id for c in p.candidates] for p in positions] == top.tolist()
    np.testing.assert_allclose([[c.probability for c in p.candidates] for p in positions],
                               values.exp().numpy(), atol=TOLERANCE)
    np.testing.assert_allclose(predictions.positions.mean_loss_nats, -actual.mean().item(),
                               atol=TOLERANCE)


def test_chunks_cover_every_position_without_a_sliver():
    for count in (1, 2, 255, 256, 257, 420, 4096):
        bounds = chunk_bounds(count, 256)
        sizes = np.diff(bounds)
        assert bounds[0] == 0 and bounds[-1] == count and (sizes <= 256).all()
        assert sizes.min() >= min(count, 128), (count, sizes)


def test_a_model_without_a_next_token_head_is_refused(encoder_runner):
    with pytest.raises(ValueError, match="not a causal language model"):
        language_model_head(encoder_runner)


def test_the_page_reads_a_long_text_whole_with_the_full_forwards_predictions(decoder_runner,
                                                                            reference):
    encoded, log_probabilities = reference
    count = len(encoded.tokens)
    at = run_page("predictions", text=LONG_TEXT, state={**DECODER, "sb_read_all": True})
    assert "were dropped" not in texts(at)  # the full trace (and its notice) never ran
    assert f"all {count:,} tokens" in texts(at)
    bars, loss, candidates = figures(at)
    top_ids, top_probabilities = expected_top(log_probabilities, count - 1)
    labels = [f"{rank}. {visible_text(readable(decoder_runner.tokenizer, token_id))}"
              for rank, token_id in enumerate(top_ids, 1)]
    assert list(bars["data"][0]["y"]) == labels
    np.testing.assert_allclose(array(bars["data"][0]["x"]), top_probabilities, atol=TOLERANCE)
    assert len(array(loss["data"][0]["y"])) == count - 1  # every position, as a line
    table = at.dataframe[0].value
    ids = encoded.input_ids[0]
    actual = log_probabilities[:-1].gather(1, ids[1:, None])[:, 0]  # (T-1,)
    np.testing.assert_allclose(table["loss (bits)"], -actual.numpy() / np.log(2), atol=TOLERANCE)
    position = at.number_input(key="pred_position_number")
    assert position.value == count - 2 and position.max == count - 2
    assert candidates["layout"]["title"]["text"] == f"Candidates after token #{count - 2}"

    position.set_value(100)
    at.run()
    _, _, candidates = figures(at)
    assert candidates["layout"]["title"]["text"] == "Candidates after token #100"
    np.testing.assert_allclose(array(candidates["data"][0]["x"]),
                               expected_top(log_probabilities, 100)[1], atol=TOLERANCE)
    assert "After reading up to token #100" in texts(at)
