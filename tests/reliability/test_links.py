"""Issue 22, rows 3 and 5: a link is read totally, inside the app's guard, and never loads a model.

A number of thousands of digits, NaN or infinity is left out with the link's usual note before
it is converted; values drawn by hypothesis go through the real link codec and the real app; a
link naming a model this session has not loaded fills the sidebar's box and asks "Load <id>?",
loading nothing until the button is pressed.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from models.limits import LINK_NUMBER_DIGITS
from models.loading.kinds import DECODER, PRETRAINED
from tests.app_support import (APP, GUARD_MESSAGE, TIMEOUT_S, assert_no_failure, figures, shown,
                               texts)
from tests.reliability.support import SENTENCE, one_sentence, tiny_bert
from ui import cache
from ui.link_values import Refused, read_value
from ui.state import MODEL_INPUT, MODEL_NAME, OFFERED

KINDS = ("bool", "text", "index", "int", "float", "number", "choice", "list")
ABSURD = {
    "5,000 digits": "9" * 5000,
    "309 digits": "1" + "0" * (LINK_NUMBER_DIGITS),
    "negative 400 digits": "-" + "7" * 400,
    "nan": "nan", "inf": "inf", "-inf": "-inf", "1e999": "1e999", "huge float": "9" * 400 + ".5",
}


def open_link(page: str | None, query: dict[str, str]) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.query_params.update(query)
    if page is not None:
        at.switch_page(f"pages/{page}.py")
    at.run()
    assert_no_failure(at)
    return at


# Row 5: absurd numbers.

@pytest.mark.parametrize("value", sorted(ABSURD), ids=str)
def test_an_absurd_seed_is_left_out_with_a_note(value):
    at = open_link("scaling", {"text": SENTENCE, "model": "scratch-random", "seed": ABSURD[value]})
    assert at.session_state["sb_seed"] == 0
    assert "is not a whole number from 0 to 2,147,483,647; using seed 0" in texts(at)


@pytest.mark.parametrize("value", sorted(ABSURD), ids=str)
def test_an_absurd_page_control_is_left_out_with_a_note(value):
    at = open_link(None, {"text": SENTENCE, "layer": ABSURD[value], "head": "1"})
    assert [slider.value for slider in at.slider] == [0, 1]  # the default layer, the link's head
    note = texts(at)
    assert "The link's layer=" in note and "it was left out" in note
    assert len(figures(at)) >= 2


def test_a_5000_digit_number_is_refused_before_it_is_converted():
    for kind in ("int", "index", "float", "number", "choice"):
        with pytest.raises(Refused, match=f"has more than {LINK_NUMBER_DIGITS} digits"):
            read_value(kind, "9" * 300 + "9" * 200, current=3)  # within the text limit
    assert read_value("int", "9" * LINK_NUMBER_DIGITS) == int("9" * LINK_NUMBER_DIGITS)


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(KINDS), current=st.sampled_from([None, True, 3, 0.5, "word"]),
       text=st.one_of(st.text(max_size=600),
                      st.from_regex(r"[+-]?[0-9]{0,700}(\.[0-9]{0,50})?([eE][+-]?[0-9]{1,6})?",
                                    fullmatch=True),
                      st.sampled_from(sorted(ABSURD.values()))))
def test_any_link_value_is_read_or_refused_never_an_exception(kind, current, text):
    try:
        value = read_value(kind, text, current)
    except Refused as reason:
        assert str(reason) and "\n" not in str(reason)
        return
    if isinstance(value, float):
        assert value == value and abs(value) != float("inf")
    if isinstance(value, int) and not isinstance(value, bool):
        assert len(str(abs(value))) <= LINK_NUMBER_DIGITS


LINK_VALUES = st.one_of(st.text(max_size=40), st.sampled_from(sorted(ABSURD.values())),
                        st.sampled_from(["true", "0", "-1", "decoder", "pretrained:x/y",
                                         "scratch-random:/etc", "nan", "1e308"]))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=st.dictionaries(st.sampled_from(["seed", "layer", "head", "merge", "hide", "long",
                                              "model", "pair", "colour"]),
                             LINK_VALUES, max_size=5))
def test_any_link_opens_a_working_page(query):
    at = open_link(None, {"text": SENTENCE, **query})
    assert figures(at) or at.error  # the maps, or a sentence saying why there are none
    for error in at.error:
        one_sentence(shown(error.value))


# Row 3: a link never loads a model by itself.

def _refusing(named: str, loader):
    """`loader` that fails the test when asked for `named` (the built-in models still load)."""
    def load(name):
        if name == named:
            raise AssertionError(f"a link loaded '{name}'")
        return loader(name)
    return load


@pytest.mark.parametrize("model, name", [("pretrained:someone/some-model", "someone/some-model"),
                                         ("decoder:gpt2", "gpt2")])
def test_a_link_naming_a_model_asks_before_loading_it(model, name, monkeypatch):
    loads = []
    real = {"load_pretrained": cache.load_pretrained, "load_decoder": cache.load_decoder}
    for function, loader in real.items():
        monkeypatch.setattr(cache, function, _refusing(name, loader))
    at = open_link(None, {"text": SENTENCE, "model": model})
    assert at.sidebar.text_input(key=MODEL_INPUT).value == name
    assert shown(at.sidebar.button(key="sb_model_offer").label) == f"Load {name}?"
    assert f"The link names the model '{name}', which this session has not loaded; showing the " \
           "built-in model" in texts(at)
    assert len(figures(at)) >= 2  # the built-in model meanwhile

    for function, loader in real.items():  # pressing the button loads it, the sidebar's way
        monkeypatch.setattr(cache, function,
                            lambda n, loader=loader: loads.append(n) or loader(n))
    at.sidebar.button(key="sb_model_offer").click().run()
    assert_no_failure(at)
    assert loads.count(name) == 1  # once, when asked (and not kept: it failed)
    assert set(loads) <= {name, DECODER.default_name, PRETRAINED.default_name}
    error = one_sentence(shown(at.sidebar.error[0].value))
    assert "downloading from the Hugging Face Hub is turned off on this server" in error
    assert OFFERED not in at.session_state and len(figures(at)) >= 2


def test_a_link_to_a_folder_loads_it_only_when_asked(tmp_path):
    folder = str(tiny_bert(tmp_path / "bert"))
    at = open_link(None, {"text": SENTENCE, "model": f"pretrained:{folder}"})
    assert at.session_state[MODEL_NAME] != folder
    assert "The link names the local folder" in texts(at)
    at.sidebar.button(key="sb_model_offer").click().run()
    assert_no_failure(at)
    assert at.session_state[MODEL_NAME] == folder and at.session_state["sb_kind"] == PRETRAINED.value
    assert len(figures(at)[1]["data"]) == 2  # a layer of the tiny BERT
    assert at.query_params["model"] == f"pretrained:{folder}"


# The link, the sidebar and the examples run inside app.py's guard.

@pytest.mark.parametrize("target", ["ui.links.LinkedView.restore", "ui.state.sidebar",
                                    "ui.examples.examples_menu"])
def test_a_failure_before_the_page_is_one_sentence_not_streamlits_box(target, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("broken on purpose")

    monkeypatch.setattr(target, broken)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.query_params.update({"text": SENTENCE, "layer": "2"})
    at.run()
    assert not at.exception
    assert any(GUARD_MESSAGE in error.value for error in at.error)


# A run whose widgets never reached the browser (Streamlit drops the previous run's unsent
# messages when a run starts): the next run sends each value whose widget the browser lacks, or
# the browser would draw the widget at its default and send that back with its next rerun.

def _browser_without(at: AppTest, widget) -> None:
    """Run `at` as the rerun that stops a first run cuts short: that run did not end, and the
    browser never got `widget` (so it sends no value for it)."""
    at.session_state["_link_page_ended"] = False  # what a stopped run leaves (ui.links.ENDED)
    states = at._tree.get_widget_states()
    kept = [state for state in states.widgets if state.id != widget.id]
    del states.widgets[:]
    states.widgets.extend(kept)
    at._run(widget_state=states)
    assert_no_failure(at)


@pytest.mark.parametrize("page, query, key, value, default", [
    (None, {"model": "decoder"}, "sb_kind", DECODER.value, PRETRAINED.value),
    (None, {"text": SENTENCE, "layer": "3"}, "maps_layer", 3, 0),
])
def test_a_value_a_stopped_run_never_showed_is_sent_with_its_widget(page, query, key, value,
                                                                       default):
    at = open_link(page, query)
    widget = at.sidebar.radio(key=key) if key == "sb_kind" else at.slider(key=key)
    assert at.session_state[key] == value
    _browser_without(at, widget)
    widget = at.sidebar.radio(key=key) if key == "sb_kind" else at.slider(key=key)
    sent = widget.proto.set_value
    if not sent:  # the browser draws the widget at its default and its next rerun sends that
        widget.set_value(default)
    at.run()
    assert_no_failure(at)
    assert sent and at.session_state[key] == value, (sent, at.session_state[key])
