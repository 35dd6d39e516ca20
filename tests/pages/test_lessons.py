"""The chapters' examples (ui/examples.py) and the lessons (pages/lessons.py, ui/lessons.py) under
AppTest: each example lands on its page with its sentence, model and controls; a head example
opens the head the head finder ranks first on the running model; lesson steps advance, go back
and restore from a link; every check question grades a right and a wrong answer."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from models.experiments import kept_classifier
from models.experiments.finetune import FinetuneSettings
from models.experiments.labelled_data import load_shipped
from models.loading.kinds import DECODER, PRETRAINED
from models.loading.pretrained import DEFAULT_MODEL
from models.store import stores
from models.store.keys import result_key
from tests.app_support import (APP, TIMEOUT_S, array, assert_no_failure, figures,
                                navigation_pages, shown, texts)
from tests.reference import reference_attentions
from ui import finetune_cache
from ui.examples import CHAPTERS, EXAMPLES, MARIO
from ui.lessons import LESSONS, PROGRESS
from ui.links import PAGE, page_controls

ROOT = Path(__file__).resolve().parents[2]
MAPS = "attention_maps"
HEAD_EXAMPLES = [example for example in EXAMPLES if example.head is not None]
LINK_EXAMPLES = [example for example in EXAMPLES if example.head is None]


def open_view(page: str, query: dict[str, str], state: dict | None = None) -> AppTest:
    """A fresh session opening `/<page>?<query>`, as a browser following a link does."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.query_params.update(query)
    for key, value in (state or {}).items():
        at.session_state[key] = value
    at.switch_page(f"pages/{page}.py")
    at.run()
    assert_no_failure(at)
    return at


def run(target) -> AppTest:
    """Run the app (`target` is the AppTest, or a widget whose value was just set)."""
    at = target.run()
    assert_no_failure(at)
    return at


def page_title(page: str) -> str:
    """The page's st.title, read from its source."""
    return re.search(r'st\.title\("([^"]+)"\)', (ROOT / f"pages/{page}.py").read_text()).group(1)


def url_path(page: str) -> str:
    return "" if page == MAPS else page  # the default page's path is the site root


# --- the examples ---------------------------------------------------------------------------

def test_every_example_opens_a_page_of_the_menu_with_controls_that_page_has():
    pages = navigation_pages()
    assert "pages/lessons.py" in pages
    assert {example.chapter for example in EXAMPLES} == set(CHAPTERS)
    assert len({example.key for example in EXAMPLES}) == len(EXAMPLES)
    for example in EXAMPLES:
        assert example.page_file in pages, example.key
        controls = page_controls(ROOT / example.page_file)
        for key, _ in example.controls:
            assert controls.kind_of(key), f"{example.key}: {example.page} has no control {key}"
    assert {example.key for example in HEAD_EXAMPLES} >= {"mario", "animal"}
    assert all(example.page == MAPS for example in HEAD_EXAMPLES)


@pytest.fixture(scope="module")
def menu() -> dict[str, tuple[str, dict[str, str]]]:
    """The sidebar menu's links, by label: (page url path, query)."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    run(at)
    links = {}
    for link in at.get("page_link"):
        query = {name: values[-1] for name, values in parse_qs(link.proto.query_string).items()}
        links[link.proto.label] = (link.proto.page, query)
    buttons = {button.key for button in at.sidebar.button}
    assert {f"examples_{example.key}" for example in HEAD_EXAMPLES} <= buttons
    return links


@pytest.mark.parametrize("example", LINK_EXAMPLES, ids=[e.key for e in LINK_EXAMPLES])
def test_an_example_lands_on_its_page_with_its_sentence_model_and_controls(menu, example):
    page, query = menu[example.title]
    assert page == url_path(example.page)
    assert query["text"] == example.text and query.get("pair", "") == example.pair
    at = open_view(example.page, query)
    assert at.session_state[PAGE] == url_path(example.page)
    assert at.title[0].value == page_title(example.page)
    assert at.sidebar.text_area[0].value == example.text
    assert at.sidebar.text_input[0].value == example.pair
    assert at.session_state["sb_kind"] == (example.model or PRETRAINED.value)
    for key, value in example.controls:
        assert at.session_state[key] == value, key
    assert "not available" not in texts(at) and "left out" not in texts(at)
    assert not at.error, [error.value for error in at.error]


def pieces(loaded, text: str, word: str) -> list[int]:
    """The token positions whose characters lie inside the first occurrence of `word`."""
    start = re.search(rf"\b{word}\b", text).start()
    offsets = loaded.tokenizer(text, return_offsets_mapping=True)["offset_mapping"]
    spans = [(first + len(text[first:last]) - len(text[first:last].lstrip()), last)
             for first, last in offsets]  # a byte-level piece's leading space left out
    return [i for i, (first, last) in enumerate(spans)
            if last > first and start <= first and last <= start + len(word)]


def he_to_mario(loaded) -> tuple[int, int]:
    """The head with the largest weight from 'he' to 'Mario' (mean over the query's pieces, sum
    over the key's), from a plain forward call."""
    weights = reference_attentions(loaded, MARIO)  # (L, H, Q, K)
    query, keys = pieces(loaded, MARIO, "he"), pieces(loaded, MARIO, "Mario")
    assert query and keys
    scores = weights[:, :, query, :].mean(axis=2)[..., keys].sum(axis=-1)  # (L, H)
    layer, head = np.unravel_index(int(np.argmax(scores)), scores.shape)
    return int(layer), int(head)


@pytest.mark.parametrize("kind", [PRETRAINED, DECODER])
def test_the_mario_example_opens_the_head_the_head_finder_ranks_first_on_the_running_model(
        kind, request):
    loaded = request.getfixturevalue("default_model" if kind is PRETRAINED else "smollm2_model")
    layer, head = he_to_mario(loaded)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.session_state["sb_kind"] = kind.value
    run(at)
    run(at.sidebar.button(key="examples_mario").click())
    assert at.title[0].value == "Attention maps"
    assert at.sidebar.text_area[0].value == MARIO
    assert at.session_state["sb_kind"] == kind.value  # the example keeps the running model
    assert (at.slider(key="maps_layer").value, at.slider(key="maps_head").value) == (layer, head)
    assert (at.query_params["layer"], at.query_params["head"]) == (str(layer), str(head))
    assert not at.error


def test_the_animal_example_finds_its_head_and_a_link_replaces_the_previous_view(default_model):
    text = "The animal didn't cross the street because it was too tired."
    weights = reference_attentions(default_model, text)
    tokens = default_model.tokenizer.convert_ids_to_tokens(default_model.tokenizer(text)["input_ids"])
    scores = weights[:, :, tokens.index("it"), tokens.index("animal")]
    expected = np.unravel_index(int(np.argmax(scores)), scores.shape)
    at = open_view("scaling", {"text": "Something else.", "pair": "A pair.", "keys": "20"})
    run(at.sidebar.button(key="examples_animal").click())
    assert at.title[0].value == "Attention maps"
    assert at.sidebar.text_area[0].value == text and at.sidebar.text_input[0].value == ""
    assert (at.slider(key="maps_layer").value, at.slider(key="maps_head").value) == expected
    assert "keys" not in at.query_params and "pair" not in at.query_params


# --- the lessons ----------------------------------------------------------------------------

TEXT = "Mario is short, but he can jump super high."
QUICK = FinetuneSettings(epochs=1, max_steps=2, seed=11)  # a few seeded steps of fine-tuning
STEPS = [(lesson.key, number) for lesson in LESSONS for number in range(1, len(lesson.steps) + 1)]


def open_step(lesson: str, step: int, text: str = TEXT, state: dict | None = None) -> AppTest:
    return open_view("lessons", {"text": text, "lesson": lesson, "step": str(step)}, state)


def test_lessons_cover_every_theme_of_the_chapters():
    titles = " ".join(lesson.title.lower() for lesson in LESSONS)
    for theme in ("from scratch", "heads", "scaled", "mask", "span", "encoder–decoder",
                  "fine-tuning"):
        assert theme in titles, theme
    for lesson in LESSONS:
        assert len(lesson.steps) >= 2, lesson.key
        for step in lesson.steps:
            sentences = re.findall(r"[.!?](\s|$)", step.text)
            assert 2 <= len(sentences) <= 3, step.title
            assert len(step.question.choices) >= 2


def test_a_step_opens_from_its_link_and_next_and_previous_move_and_write_the_link():
    at = open_step("masks", 2)
    assert at.selectbox(key="lessons_lesson").value == "masks"
    assert at.radio(key="lessons_step").value == 2
    assert at.subheader[0].value == "2. How the mask is applied"
    assert (at.query_params["lesson"], at.query_params["step"]) == ("masks", "2")
    run(at.button(key="lessons_next").click())
    assert at.radio(key="lessons_step").value == 3
    assert at.subheader[0].value == "3. Padding: two sentences in one batch"
    assert at.query_params["step"] == "3"
    assert ("masks", 2) in at.session_state[PROGRESS]["done"]
    assert "1 of 3 steps done" in at.get("progress")[0].proto.text
    run(at.button(key="lessons_previous").click())
    assert at.radio(key="lessons_step").value == 2 and at.query_params["step"] == "2"
    assert at.button(key="lessons_previous").disabled is False
    run(at.button(key="lessons_previous").click())
    assert at.radio(key="lessons_step").value == 1 and at.button(key="lessons_previous").disabled
    run(at.selectbox(key="lessons_lesson").set_value("span"))
    assert at.radio(key="lessons_step").value == 1 and at.query_params["lesson"] == "span"
    assert at.subheader[0].value == "1. A soft mask with a ramp"


def test_a_step_the_lesson_does_not_have_falls_back_to_step_one_with_a_note():
    at = open_step("scaling", 9)
    assert at.radio(key="lessons_step").value == 1
    assert "step=9 is not available here" in texts(at)
    assert at.query_params["step"] == "1"


@pytest.mark.parametrize("lesson, number", STEPS, ids=[f"{key}-{n}" for key, n in STEPS])
def test_each_check_question_grades_a_right_and_a_wrong_answer(lesson, number, monkeypatch):
    # The fine-tuning lesson's steps show a trained classifier: a few seeded steps do here (its
    # own settings train for 20 to 40 s on a fresh machine, and no question depends on them).
    monkeypatch.setattr(finetune_cache, "lesson_settings", lambda: QUICK)
    question = next(l for l in LESSONS if l.key == lesson).steps[number - 1].question
    key = f"lessons_answer_{lesson}_{number}"
    at = open_step(lesson, number)
    assert at.radio(key=key).value is None and not at.success and not at.warning
    wrong = next(i for i, choice in enumerate(question.choices) if not choice.right)
    run(at.radio(key=key).set_value(wrong))
    assert shown(at.warning[-1].value) == f"Not quite. {question.choices[wrong].why}"
    assert (lesson, number) not in at.session_state[PROGRESS]["right"]
    run(at.radio(key=key).set_value(question.right_index))
    assert shown(at.success[-1].value) == f"Right. {question.choices[question.right_index].why}"
    assert (lesson, number) in at.session_state[PROGRESS]["right"]
    assert not at.error, [error.value for error in at.error]


def test_a_step_draws_the_running_models_own_attention_for_the_sidebar_sentence(default_model):
    at = open_step("scratch", 2)
    heatmap = figures(at)[0]
    expected = reference_attentions(default_model, TEXT)
    np.testing.assert_allclose(array(heatmap["data"][0]["z"]), expected[0, 0], atol=1e-5)


def test_the_pronoun_step_ranks_the_heads_of_the_running_model(default_model):
    at = open_step("scratch", 4)
    scores = array(figures(at)[0]["data"][0]["z"])
    weights = reference_attentions(default_model, TEXT)
    np.testing.assert_allclose(scores, weights[:, :, 6, 1], atol=1e-5)  # 'he' #6 -> 'mario' #1
    at = open_step("scratch", 4, text="Time flies like an arrow.")
    assert not figures(at) and "no 'he' and 'Mario'" in texts(at)
    run(at.button(key="lessons_scratch_4_try").click())
    assert at.sidebar.text_area[0].value == MARIO and len(figures(at)) == 1


def test_try_this_switches_the_model_to_the_decoder_and_the_map_becomes_causal():
    at = open_step("masks", 1)
    assert not np.allclose(np.triu(array(figures(at)[0]["data"][0]["z"]), 1), 0)
    run(at.button(key="lessons_masks_1_try").click())
    assert at.session_state["sb_kind"] == DECODER.value
    weights = array(figures(at)[0]["data"][0]["z"])
    assert np.all(np.triu(weights, 1) == 0) and np.allclose(weights.sum(axis=1), 1, atol=1e-5)
    assert at.query_params["model"] == "decoder"


def test_try_this_takes_the_mask_away_and_puts_it_back():
    at = open_step("masks", 2)
    masked = array(figures(at)[0]["data"][0]["z"]).reshape(13, 13)
    assert np.all(np.isnan(masked[np.triu_indices(13, 1)]))  # −∞ cells: no number to colour
    assert not np.any(np.isnan(masked[np.tril_indices(13)]))
    run(at.button(key="lessons_masks_2_try").click())
    assert not np.any(np.isnan(array(figures(at)[0]["data"][0]["z"])))
    run(at.button(key="lessons_masks_2_try").click())
    np.testing.assert_array_equal(array(figures(at)[0]["data"][0]["z"]).reshape(13, 13), masked)


def test_a_step_without_a_trained_model_trains_once_and_keeps_it_on_disk(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTENTION_EXPLORER_CACHE", str(tmp_path))  # a machine that never trained
    monkeypatch.setattr(finetune_cache, "lesson_settings", lambda: QUICK)
    key = finetune_cache.training_key(DEFAULT_MODEL, load_shipped(), QUICK)

    def forget() -> None:
        """Nothing of this training in this process's memory."""
        finetune_cache.store().results.forget(key)
        stores.RESULTS.forget(result_key("before_after", key, DEFAULT_MODEL, TEXT))

    forget()  # the check questions train the same way, maybe earlier in this process
    trainings = finetune_cache.store().trainings
    at = open_step("finetune", 2)
    assert finetune_cache.store().trainings == trainings + 1
    assert len(list(tmp_path.glob("classifier-*/training.json"))) == 1
    bars = figures(at)[0]["data"]
    assert [bar["name"] for bar in bars] == ["before fine-tuning", "after fine-tuning"]
    after = array(bars[1]["y"])
    assert after.sum() == pytest.approx(1.0, abs=1e-5)

    # A later server process: nothing in memory, and training would fail; the disk answers.
    forget()

    def refuse(*args, **kwargs):
        raise AssertionError("trained again instead of reading the kept classifier")
    monkeypatch.setattr(kept_classifier, "finetune", refuse)
    at = open_step("finetune", 2)
    np.testing.assert_allclose(array(figures(at)[0]["data"][1]["y"]), after, atol=1e-5)
    assert finetune_cache.store().trainings == trainings + 2  # one read from disk
