"""AppTest of the generation page on the real SmolLM2, asserting on the values it shows."""

from __future__ import annotations

import numpy as np
import pytest

from models.loading.decoder import load_decoder
from models.experiments.generation import MAX_NEW_TOKENS, GenerationSettings, generate
from tests.app_support import array, figure_titled, figures, run_page, texts
from tests.app_support import shown as displayed
from ui import generation_cache

PROMPT = "The capital of France is"
STEPS = 4


@pytest.fixture(scope="module")
def reference():
    """What models.experiments.generation gives for the page's default request: the values to expect."""
    loaded = load_decoder()
    return generate(loaded.model, loaded.tokenizer, PROMPT, GenerationSettings(new_tokens=STEPS),
                    token_limit=loaded.max_tokens, source=loaded.name)


@pytest.fixture
def generate_calls(monkeypatch):
    """Count the page's calls to the generation loop."""
    calls = []

    def counted(*args, **kwargs):
        calls.append(args[2])
        return generate(*args, **kwargs)

    monkeypatch.setattr(generation_cache, "generate", counted)
    return calls


def row_of(at) -> np.ndarray:
    return array(figure_titled(at, "the row that chose")["data"][0]["z"])


def test_generates_and_the_step_slider_does_not_generate_again(reference, generate_calls):
    at = run_page("generation", text=PROMPT, state={"gen_new_tokens": STEPS})
    assert not at.error
    assert at.title[0].value == "Generation, one token at a time"
    assert len(generate_calls) == 1
    shown = reference.generated_text.replace("\n", "↵")
    assert at.text[0].value == f"Prompt:    {PROMPT}\nGenerated: {shown}"
    assert reference.steps[0].token.text == " Paris"
    assert "chose `` ' Paris' `` with probability 0.77" in texts(at)
    bars = figure_titled(at, "Step 0: the candidates")["data"][0]
    assert bars["y"][0] == "1. ␣Paris"
    np.testing.assert_allclose(array(bars["x"]),
                               [c.probability for c in reference.steps[0].candidates], atol=1e-5)
    row = row_of(at)
    assert row.shape == (1, 5)
    assert abs(row.sum() - 1.0) < 1e-5
    np.testing.assert_allclose(row[0], reference.steps[0].weights[0, 0], atol=1e-5)

    at.slider(key="gen_step").set_value(2)
    at.slider(key="gen_layer").set_value(3)
    at.slider(key="gen_head").set_value(4)
    at.run()
    assert not at.error
    assert len(generate_calls) == 1  # the result came from the session, not a new generation
    step = reference.steps[2]
    assert f"At step 2 the model read 7 tokens and chose `` {step.token.text!r} ``" in texts(at)
    row = row_of(at)
    assert row.shape == (1, 7)
    assert abs(row.sum() - 1.0) < 1e-5
    np.testing.assert_allclose(row[0], step.weights[3, 4], atol=1e-5)
    overview = array(figure_titled(at, "Layer 3: weight on the first token")["data"][0]["z"])
    np.testing.assert_allclose(overview, reference.first_token_weights()[:, 3].T, atol=1e-5)
    sinks = array(figure_titled(at, "Mean weight on the first token")["data"][0]["z"])
    np.testing.assert_allclose(sinks, reference.sink_share(), atol=1e-5)
    assert "attention sink" in texts(at)


def test_sampling_with_a_seed_shows_the_models_tokens(generate_calls):
    at = run_page("generation", text=PROMPT, state={"gen_new_tokens": 3, "gen_mode": "Sample",
                                                    "gen_temperature": 1.3, "gen_seed": 11})
    assert not at.error
    loaded = load_decoder()
    expected = generate(loaded.model, loaded.tokenizer, PROMPT,
                        GenerationSettings(new_tokens=3, greedy=False, temperature=1.3, seed=11),
                        token_limit=loaded.max_tokens, source=loaded.name)
    assert at.text[0].value.endswith(f"Generated: {expected.generated_text.replace(chr(10), '↵')}")
    assert "seed 11" in texts(at)
    at.run()  # a rerun with the same inputs keeps the result
    assert len(generate_calls) == 1


@pytest.mark.parametrize("state, text, shown", [
    ({"gen_new_tokens": 0}, PROMPT, "Ask for at least 1 new token, not 0."),
    ({"gen_new_tokens": MAX_NEW_TOKENS + 1}, PROMPT,
     f"At most {MAX_NEW_TOKENS} new tokens can be generated at once, not {MAX_NEW_TOKENS + 1}."),
    ({"gen_new_tokens": 3}, "word " * 400, "there is no room for new tokens: shorten it."),
    ({"gen_new_tokens": 3, "gen_mode": "Sample", "gen_temperature": 0.0}, PROMPT,
     "The temperature must be above 0, not 0.0."),
    ({"gen_new_tokens": 3}, "   ", "Type a sentence in the sidebar: it is the prompt the model "
                                   "continues."),
])
def test_bad_input_is_one_sentence_and_the_page_keeps_working(state, text, shown):
    at = run_page("generation", text=text, state=state)
    assert not at.error
    assert shown in "\n".join(displayed(m.value) for m in [*at.warning, *at.info])
    assert not figures(at)
    at.number_input(key="gen_new_tokens").set_value(2)
    at.radio(key="gen_mode").set_value("Greedy")
    at.sidebar.text_area(key="sb_text").set_value(PROMPT)
    at.run()
    assert not at.error and not at.warning
    assert at.text[0].value == f"Prompt:    {PROMPT}\nGenerated:  Paris."
    assert len(figures(at)) == 4
