"""Links to a view (ui/links.py) under AppTest: pages restore their state from the query, write
it back when a control changes, fall back with a note from values that do not exist, and put
nothing else into the link."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.proto.MultiSelect_pb2 import MultiSelect
from streamlit.testing.v1 import AppTest

from models.loading.pretrained import DEFAULT_MODEL
from models.loading.kinds import DECODER, PRETRAINED, SCRATCH_RANDOM
from tests.app_support import (APP, TIMEOUT_S, assert_no_failure, navigation_pages, shown,
                                texts)
from ui.state import PRESENTER_CSS
from ui.link_codec import SHARED
from ui.link_controls import page_controls
from ui.link_values import link_text, read_value
from ui.state import DEFAULT_TEXT, LOAD_MESSAGE, LOADED_NAMES, MODEL_NAME

ROOT = Path(__file__).resolve().parents[2]
TEXT = "Mario is short, but he can jump super high."
MARIO_TOKENS = 13  # [CLS] mario is short , but he can jump super high . [SEP]


def open_link(page: str | None, query: dict[str, str], state: dict | None = None) -> AppTest:
    """A fresh session opening `/<page>?<query>` (the default page when `page` is None)."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.query_params.update(query)
    for key, value in (state or {}).items():
        at.session_state[key] = value
    if page is not None and page != "attention_maps":  # the default page is the site root: "/?…"
        at.switch_page(f"pages/{page}.py")  # (its own name redirects there; the browser tests
    at.run()                                # check /attention_maps?… keeps the link's values)
    assert_no_failure(at)
    return at


def rerun(at: AppTest) -> AppTest:
    at.run()
    assert_no_failure(at)
    return at


def assert_link(at: AppTest, page: str, expected: dict[str, str]) -> None:
    """The written query holds `expected`; anything more is one of the page's own controls."""
    query = dict(at.query_params)
    assert {name: query.get(name) for name in expected} == expected
    controls = page_controls(ROOT / f"pages/{page}.py")
    others = set(query) - set(expected)
    assert all(controls.kind_of(controls.key_of(name)) for name in others), others


def by_label(widgets, label: str):
    matches = [widget for widget in widgets if widget.label == label]
    assert len(matches) == 1, [widget.label for widget in widgets]
    return matches[0]


# --- which controls each page has ----------------------------------------------------------

KNOWN_PREFIXES = {
    "attention_maps": "maps", "all_heads": "all", "row_arithmetic": "arith",
    "head_statistics": "stats", "rollout": "rollout", "compare": "compare",
    "causal_masks": "masks", "adaptive_span": "span", "scaling": "scaling",
    "positions": "positions", "bertviz_views": "bertviz", "predictions": "pred",
    "generation": "gen", "cross_attention": "xattn", "head_detectors": "detectors",
    "encoder_layer": "encoder_layer", "lessons": "lessons", "head_finder": "finder",
    "ablation": "ablation", "fine_tuning": "fine_tuning", "activation_patching": "patch",
    "logit_lens": "lens", "logit_attribution": "dla", "corpus": "corpus",
}


def test_every_page_in_the_menu_has_a_prefix_that_all_its_widget_keys_share():
    pages = navigation_pages()
    assert len(pages) >= len(KNOWN_PREFIXES)
    for path in pages:
        controls = page_controls(ROOT / path)
        stem = Path(path).stem
        assert controls.prefix, f"{path}: no widget keys found"
        if stem in KNOWN_PREFIXES:
            assert controls.prefix == KNOWN_PREFIXES[stem], path
        keys = re.findall(r"""key\s*=\s*f?["']([^"']+)["']""", (ROOT / path).read_text())
        assert keys, path
        unprefixed = [key for key in keys if not key.startswith(controls.prefix + "_")]
        assert not unprefixed, f"{path}: a link cannot find {unprefixed}"


def test_controls_are_read_from_the_source_with_their_kinds():
    maps = page_controls(ROOT / "pages/attention_maps.py")
    assert list(maps.kinds)[:2] == ["maps_layer", "maps_head"]  # in reading order
    assert maps.kind_of("maps_layer") == maps.kind_of("maps_head") == "index"
    assert [maps.name_of(key) for key in ("maps_layer", "maps_head")] == ["layer", "head"]
    assert maps.kind_of("maps_heatmap") is None  # a chart is not a setting
    span = page_controls(ROOT / "pages/adaptive_span.py")
    assert span.kind_of("span_z") == "float" and span.kind_of("span_per_head") == "bool"
    assert span.kind_of("span_z_head_7") == "float"  # an f-string key is a pattern
    assert span.kind_of("span_retrain") is None  # a button is not a setting
    assert span.kind_of("span_learned") is None  # nor is a chart
    scaling = page_controls(ROOT / "pages/scaling.py")
    assert scaling.kind_of("scaling_keys") == "int" and scaling.kind_of("scaling_dk") == "choice"
    assert scaling.name_of("scaling_seed") == "scaling_seed"  # "seed" belongs to the sidebar
    assert scaling.key_of("scaling_seed") == scaling.key_of("seed") == "scaling_seed"


@pytest.mark.parametrize("kind, value", [
    ("bool", True), ("bool", False), ("int", 7), ("index", 0), ("float", 2.5), ("float", 1e-7),
    ("text", "Fruit flies & bananas = 100%?"), ("choice", "entropy_bits"), ("choice", 64),
    ("choice", 0.25), ("number", -3),
])
def test_a_value_written_into_a_link_reads_back_the_same(kind, value):
    back = read_value(kind, link_text(value))
    assert back == value and type(back) is type(value)


def test_link_text_leaves_out_what_is_not_one_scalar():
    assert link_text((2, 5)) is None and link_text([1]) is None and link_text(None) is None
    assert link_text({"rows": []}) is None and link_text(float("nan")) is None
    assert link_text("x" * 501) is None
    assert link_text(np.int64(7)) == "7" and link_text(np.float32(0.5)) == "0.5"  # numpy scalars


# --- pages restore their state and write it back --------------------------------------------

def test_the_deep_link_of_the_issue_opens_that_layer_head_and_sentence():
    at = open_link(None, {"text": TEXT, "layer": "5", "head": "5"})
    assert [(slider.label, slider.value) for slider in at.slider] == [("Layer", 5), ("Head", 5)]
    assert at.sidebar.text_area[0].value == TEXT
    assert f"{MARIO_TOKENS} tokens" in texts(at)
    assert_link(at, "attention_maps", {"text": TEXT, "layer": "5", "head": "5"})
    assert "not available" not in texts(at)


# page, link, {widget label: value shown}, (label of a widget to change, new value), written.
# Every page of the menu (a test below checks it); slow pages get controls that start no long
# work: fine_tuning is given epochs no other test trains, so it stops before training.
PAGES = [
    ("attention_maps", {"layer": "5", "head": "5"}, {"Layer": 5, "Head": 5}, ("Head", 2),
     {"layer": "5", "head": "2"}),
    ("predictions", {"model": "decoder", "position": "4"}, {"Position": 4}, ("Position", 6),
     {"position": "6", "model": "decoder"}),
    ("head_finder", {"query": "he", "keys": "Mario"},
     {"Query token": "he", "Key tokens (separate several with commas)": "Mario"},
     ("Key tokens (separate several with commas)", "Mario, short"),
     {"query": "he", "keys": "Mario, short"}),
    ("ablation", {"model": "decoder", "mode": "mean", "ko_query": "3", "target": " high"},
     {"Ablation": "mean", "Query token": 3, "Next token to follow": " high"},
     ("Query token", 5), {"ko_query": "5", "mode": "mean", "target": " high"}),
    ("fine_tuning", {"data": "shipped", "epochs": "7"},
     {"Labelled sentences": "shipped", "Epochs (passes over the training sentences)": 7},
     ("Epochs (passes over the training sentences)", 6), {"epochs": "6", "data": "shipped"}),
    ("all_heads", {"layer": "2", "head": "7"}, {"Layer": 2, "Head": 7},
     ("Head", 3), {"layer": "2", "head": "3"}),
    ("row_arithmetic", {"layer": "1", "head": "4", "query": "3"},
     {"Layer": 1, "Head": 4, "Query token": 3}, ("Query token", 5), {"query": "5"}),
    ("head_statistics", {"column": "punctuation"},
     {"Colour the layer × head map by": "punctuation"},
     ("Colour the layer × head map by", "mean_distance"), {"column": "mean_distance"}),
    ("rollout", {"layer": "2"}, {"Layer": 2}, ("Layer", 4), {"layer": "4"}),
    ("bertviz_views", {"view": "model"}, {"View": "model"}, ("View", "head"), {"view": "head"}),
    ("causal_masks", {"weights": "copied", "steps_of": "bidirectional", "layer": "3",
                      "first": "One two.", "forget": "true"},
     {"Steps of": "bidirectional", "Layer": 3, "First sentence": "One two.",
      "Leave the padding mask out": True},
     ("Leave the padding mask out", False), {"forget": "false", "weights": "copied"}),
    ("scaling", {"dk": "256", "keys": "12", "scaling_seed": "5"},
     {"d_k, the size of each query and key vector": 256, "Number of keys": 12,
      "Random draw (seed)": 5}, ("Number of keys", 20), {"keys": "20", "scaling_seed": "5"}),
    ("adaptive_span", {"z": "5.5", "ramp": "4.0", "form": "causal", "per_head": "true",
                       "z_head_2": "9.0"},
     {"Span z (tokens)": 5.5, "Ramp width R (tokens)": 4.0, "z, head 2": 9.0,
      "A different z for each head (the same in every layer)": True},
     ("Ramp width R (tokens)", 1.5), {"ramp": "1.5", "z_head_2": "9.0", "form": "causal"}),
    ("compare", {"pair": "Fruit flies.", "head": "3-7"},
     {"Head to compare (most different first)": "3-7"},
     ("Head to compare (most different first)", "0-0"), {"head": "0-0", "pair": "Fruit flies."}),
    ("positions", {"count": "128", "dim": "64"}, {"Positions": 128,
                                                  "Dimensions (sinusoidal encoding)": 64},
     ("Positions", 256), {"count": "256", "dim": "64"}),
    ("head_detectors", {"kind": "previous-token"}, {"Detector": "previous-token"},
     ("Detector", "first-token sink"), {"kind": "first-token sink"}),
    ("encoder_layer", {"layer": "3", "head": "5"}, {"Layer": 3, "Head": 5}, ("Head", 2),
     {"layer": "3", "head": "2"}),
    ("cross_attention", {"layer": "1", "head": "2"}, {"Layer": 1, "Head": 2}, ("Head", 0),
     {"layer": "1", "head": "0"}),
    ("generation", {"model": "decoder", "new_tokens": "3", "step": "2"},
     {"New tokens": 3, "Step": 2}, ("Step", 1), {"step": "1", "new_tokens": "3"}),
    ("lessons", {"lesson": "masks", "step": "2"}, {"Step": 2}, ("Step", 1),
     {"lesson": "masks", "step": "1"}),
    ("deck", {"choice": "chapter-3"}, {"Deck": "chapter-3"}, ("Deck", "chapter-1"),
     {"choice": "chapter-1"}),
    ("activation_patching", {"model": "decoder", "clean": "The capital of France is",
                             "corrupted": "The capital of Italy is", "answer": "Paris",
                             "wrong": "Rome", "site": "head_position", "layer": "20"},
     {"Answer (one token)": "Paris", "Wrong token (one token)": "Rome",
      "What to patch": "head_position", "Layer": 20},
     ("Layer", 21), {"layer": "21", "site": "head_position", "clean": "The capital of France is",
                     "corrupted": "The capital of Italy is", "answer": "Paris"}),
    ("logit_lens", {"model": "decoder", "token": "jump", "colour": "chosen"},
     {"Token to follow (empty: the model's own prediction)": "jump",
      "Colour each cell by the probability of": "chosen"},
     ("Colour each cell by the probability of", "final"), {"colour": "final", "token": "jump"}),
    ("corpus", {"measure": "previous", "layer": "2", "head": "3"},
     {"Measure": "previous", "Layer": 2, "Head": 3}, ("Head", 4),
     {"head": "4", "layer": "2", "measure": "previous"}),
    ("logit_attribution", {"model": "decoder", "answer": "jump", "wrong": "run", "count": "8"},
     {"Answer (one token)": "jump", "Parts in the bar chart": 8}, ("Parts in the bar chart", 10),
     {"count": "10", "answer": "jump", "wrong": "run"}),
    ("masked_lm", {"recipe_seed": "7"}, {"Draw (seed)": 7}, ("Draw (seed)", 3),
     {"recipe_seed": "3"}),
    ("neuron_view", {"layer": "2", "head": "3"},
     {"Layer": 2, "Head (bertviz's menu changes it too)": 3}, ("Layer", 4),
     {"layer": "4", "head": "3"}),
    ("attention_cost", {"shape": "BERT-base"}, {"Layer": "BERT-base"},
     ("Layer", "MiniLM (the embedded encoder)"), {"shape": "MiniLM (the embedded encoder)"}),
]


def test_the_round_trip_covers_every_page_in_the_menu():
    assert sorted(page for page, *_ in PAGES) == sorted(Path(path).stem
                                                       for path in navigation_pages())


def shown_widgets(at: AppTest) -> dict:
    values = {}
    for kind in ("slider", "select_slider", "selectbox", "radio", "number_input", "text_input",
                 "checkbox", "toggle"):
        for widget in at.main.get(kind):
            values.setdefault(widget.label, widget.value)
    return values


@pytest.mark.parametrize("page, link, shown, change, written", PAGES,
                         ids=[page for page, *_ in PAGES])
def test_a_page_restores_its_controls_from_the_link_and_writes_changes_back(
        page, link, shown, change, written):
    at = open_link(page, {"text": TEXT, **link})
    values = shown_widgets(at)
    for label, value in shown.items():
        assert values[label] == value, label
    controls = page_controls(ROOT / f"pages/{page}.py")
    assert {name: at.query_params[name] for name in link} == {
        name: text if name in SHARED else
        link_text(read_value(controls.kind_of(controls.key_of(name)), text))
        for name, text in link.items()}  # as written back: "4.0" stays "4.0", "true" "true"
    assert set(at.query_params) - set(SHARED) <= {controls.name_of(key) for key in at.session_state
                                                  if controls.kind_of(str(key))}
    assert "not available" not in texts(at) and "left out" not in texts(at)

    label, value = change
    widget = next(w for w in at.main.get(type_of(at, label)) if w.label == label)
    widget.set_value(value)
    rerun(at)
    for name, text in written.items():
        assert at.query_params[name] == text, name
    assert at.query_params["text"] == TEXT


def type_of(at: AppTest, label: str) -> str:
    for kind in ("slider", "select_slider", "selectbox", "radio", "number_input", "text_input",
                 "checkbox", "toggle"):
        if any(widget.label == label for widget in at.main.get(kind)):
            return kind
    raise AssertionError(f"no widget labelled {label!r}")


def test_a_link_written_by_a_page_opens_the_same_view_in_a_new_session():
    first = open_link("causal_masks", {"text": TEXT})
    first.main.get("radio")[0].set_value("copied")
    rerun(first)
    by_label(first.main.get("slider"), "Head").set_value(2)
    rerun(first)
    link = dict(first.query_params)
    assert link["weights"] == "copied" and link["head"] == "2" and link["first"] == "The cat sat."
    second = open_link("causal_masks", link)
    assert shown_widgets(second) == shown_widgets(first)
    assert second.query_params == link


def test_back_and_forward_reopen_earlier_queries_of_the_same_session():
    at = open_link(None, {"text": TEXT, "layer": "5", "head": "5"})
    earlier = dict(at.query_params)
    at.slider[1].set_value(2)
    rerun(at)
    later = dict(at.query_params)
    assert later["head"] == "2"
    at.query_params.clear()  # the browser goes back: Streamlit reruns with that entry's query
    at.query_params.update(earlier)
    rerun(at)
    assert at.slider[1].value == 5 and at.query_params == earlier
    at.query_params.clear()
    at.query_params.update(later)
    rerun(at)
    assert at.slider[1].value == 2 and at.query_params == later
    assert_link(at, "attention_maps", {"text": TEXT, "layer": "5", "head": "2"})


def test_a_rerun_carrying_an_older_query_of_this_session_keeps_the_moved_control():
    """Two quick slider moves: the second rerun leaves the browser before the query the first
    one wrote has arrived, so it carries the query from before both moves."""
    at = open_link(None, {"text": TEXT, "layer": "5", "head": "5"})
    before = dict(at.query_params)
    at.slider[1].set_value(4)
    rerun(at)
    assert at.query_params["head"] == "4"
    at.query_params.clear()
    at.query_params.update(before)  # the browser has not yet received head=4
    at.slider[1].set_value(3)
    rerun(at)
    assert at.slider[1].value == 3 and at.query_params["head"] == "3"
    assert "not available" not in texts(at)
    at.query_params.clear()
    at.query_params.update(before)  # back to the first query, the slider untouched: a link
    rerun(at)
    assert at.slider[1].value == 5 and at.query_params["head"] == "5"


def test_a_link_is_read_once_even_when_its_page_stops_before_writing_it():
    at = open_link("head_finder", {"text": TEXT, "query": "he"})  # no keys: the page stops
    assert by_label(at.text_input, "Query token").value == "he"
    by_label(at.text_input, "Query token").set_value("jump")
    rerun(at)
    assert by_label(at.text_input, "Query token").value == "jump"
    assert at.query_params["query"] == "jump"


def test_a_whole_link_resets_what_it_leaves_out_and_a_partial_one_changes_only_what_it_names():
    at = open_link(None, {"text": TEXT, "layer": "3", "head": "4", "merge": "true"})
    at.query_params.clear()
    at.query_params.update({"text": "Hello there.", "head": "1"})  # a whole view: layer 0
    rerun(at)
    assert [slider.value for slider in at.slider] == [0, 1]
    assert at.session_state["sb_merge_words"] is False
    partial = open_link(None, {"head": "6"}, state={"sb_text": "My own sentence."})
    assert partial.sidebar.text_area[0].value == "My own sentence."
    assert partial.slider[1].value == 6 and partial.query_params["text"] == "My own sentence."


# --- the shared inputs ------------------------------------------------------------------------

def test_the_shared_inputs_round_trip_through_a_link():
    link = {"text": "Dog bites man.", "pair": "Man bites dog.", "model": "scratch-random",
            "seed": "17", "merge": "true", "hide": "true", "keys": "4"}
    at = open_link("scaling", link)  # a page that runs no model: only the sidebar is read
    sidebar = at.sidebar
    assert sidebar.text_area[0].value == "Dog bites man."
    assert sidebar.text_input[0].value == "Man bites dog."
    assert sidebar.radio[0].value == SCRATCH_RANDOM.value
    assert sidebar.number_input[0].value == 17
    assert [toggle.value for toggle in sidebar.toggle] == [True, True, False, False]
    assert [toggle.key for toggle in sidebar.toggle][2:] == ["sb_presenter", "sb_palette_safe"]
    assert_link(at, "scaling", {**link, "present": None})  # presenter mode off: not in the link

    decoder = open_link("scaling", {"text": "Hi.", "model": "decoder"})
    assert decoder.sidebar.radio[0].value == DECODER.value
    assert_link(decoder, "scaling", {"text": "Hi.", "model": "decoder", "dk": "64", "keys": "8",
                                     "scaling_seed": "0"})
    plain = open_link("scaling", {"text": "Hi."})
    assert plain.sidebar.radio[0].value == PRETRAINED.value
    assert_link(plain, "scaling", {"text": "Hi.", "model": None, "pair": None})


def test_presenter_mode_travels_in_a_link_and_a_link_without_it_leaves_it_alone():
    shown = open_link("scaling", {"text": "Hi.", "present": "true"})
    assert shown.toggle(key="sb_presenter").value is True
    assert [m.value for m in shown.html].count(PRESENTER_CSS) == 1
    assert_link(shown, "scaling", {"text": "Hi.", "present": "true"})
    assert "present=true" in shown.sidebar.get("code")[0].value  # "Link to this view"
    kept = open_link("scaling", {"text": "Hi."}, state={"sb_presenter": True})
    assert kept.toggle(key="sb_presenter").value is True and kept.query_params["present"] == "true"
    off = open_link("scaling", {"text": "Hi.", "present": "false"}, state={"sb_presenter": True})
    assert off.toggle(key="sb_presenter").value is False and "present" not in off.query_params
    odd = open_link("scaling", {"text": "Hi.", "present": "loud"})
    assert "The link's present='loud' is not true or false" in texts(odd)
    assert odd.toggle(key="sb_presenter").value is False


def test_a_model_from_a_link_is_a_hub_id_or_a_folder_this_session_loaded(tmp_path):
    folder = str(tmp_path / "my-model")
    refused = open_link("scaling", {"text": "Hi.", "model": f"pretrained:{folder}"})
    assert "which this session has not loaded" in texts(refused)
    assert refused.session_state[MODEL_NAME] == DEFAULT_MODEL
    assert "model" not in refused.query_params

    mine = open_link("scaling", {"text": "Hi.", "model": f"scratch-copied:{folder}"},
                     state={LOADED_NAMES: {folder}})  # loaded from this session's sidebar
    assert mine.session_state[MODEL_NAME] == folder and "has not loaded" not in texts(mine)
    assert mine.query_params["model"] == f"scratch-copied:{folder}"

    missing = open_link("scaling", {"text": "Hi.", "model": "pretrained:no-such-org/no-model"})
    assert "no-such-org/no-model" in texts(missing) and "built-in model" in texts(missing)
    assert missing.session_state[MODEL_NAME] == DEFAULT_MODEL


# --- values that do not exist fall back, with a note -----------------------------------------

def test_values_that_do_not_exist_fall_back_with_a_note():
    at = open_link(None, {"text": TEXT, "layer": "40", "head": "-2", "colour": "red"})
    assert [slider.value for slider in at.slider] == [5, 0]
    shown = texts(at)
    assert "Layer 40 does not exist here (6 in all, 0 to 5): showing layer 5." in shown
    assert "Head -2 does not exist here" in shown
    assert "'colour' is not a setting of this page" in shown
    assert_link(at, "attention_maps", {"text": TEXT, "layer": "5", "head": "0", "colour": None})

    choice = open_link("head_statistics", {"text": TEXT, "column": "nonsense"})
    assert choice.selectbox[0].value == "entropy_bits"
    assert "The link's column=nonsense is not available here; showing entropy_bits." in \
        texts(choice)
    assert choice.query_params["column"] == "entropy_bits"

    ranged = open_link("scaling", {"text": TEXT, "keys": "99", "dk": "256"})
    assert by_label(ranged.slider, "Number of keys").value == 8  # its range is 2 to 32
    assert ranged.select_slider[0].value == 256  # the valid value is kept
    assert "The link's keys=99 is outside what this page allows; it was left out." in \
        texts(ranged)
    assert "keys" not in ranged.query_params or ranged.query_params["keys"] == "8"

    typed = open_link("scaling", {"text": TEXT, "keys": "many"})
    assert "The link's keys='many' is not a number; it was left out." in texts(typed)


def test_shared_values_that_do_not_exist_fall_back_with_a_note():
    at = open_link("scaling", {"text": "x" * 20_001, "model": "quantum", "seed": "-1",
                               "merge": "maybe"})
    shown = texts(at)
    assert "Only the first 20,000 characters of the link's text are used." in shown
    assert "The link's model 'quantum' is not one this app knows" in shown
    assert "The link's seed '-1' is not a whole number" in shown
    assert "The link's merge='maybe' is not true or false" in shown
    assert len(at.sidebar.text_area[0].value) == 20_000
    assert at.sidebar.radio[0].value == PRETRAINED.value
    assert at.session_state["sb_merge_words"] is False


# --- nothing else leaks into a link ---------------------------------------------------------

def test_nothing_but_the_view_goes_into_a_link():
    secret = "/srv/private/weights"
    at = open_link("causal_masks", {"text": TEXT}, state={
        LOAD_MESSAGE: ("success", f"Loaded '{secret}'."),
        "masks_notes": "a private note",  # a session value with the page's prefix, no widget
        "span_trained_result": "trained spans",  # another page's stored result
        "sb_model_input": secret,  # typed but never loaded
    })
    by_label(at.text_input, "Second sentence").set_value("y" * 600)  # data, not a setting
    rerun(at)
    link = dict(at.query_params)
    page = page_controls(ROOT / "pages/causal_masks.py")
    assert set(link) <= set(SHARED) | {page.name_of(key) for key in page.kinds}
    assert "second" not in link
    everything = "&".join(f"{name}={value}" for name, value in link.items())
    for leaked in (secret, "private note", "trained", "Loaded"):
        assert leaked not in everything
    assert link["text"] == TEXT


def test_the_sidebar_offers_the_whole_link_to_copy():
    at = open_link("all_heads", {"text": TEXT, "layer": "1", "head": "2"})
    codes = [code.value for code in at.sidebar.code]
    assert len(codes) == 1
    assert re.fullmatch(r".*/all_heads\?text=Mario\+is\+short%2C\+but\+he\+can\+jump\+super\+high."
                        r"&layer=1&head=2(&.*)?", codes[0]), codes[0]
    default = open_link(None, {"text": DEFAULT_TEXT})
    assert "/?text=Time+flies+like+an+arrow.&layer=0&head=0" in default.sidebar.code[0].value


# --- multiselects ----------------------------------------------------------------------------

def test_the_ablation_pages_multiselects_go_into_the_link_and_come_back():
    at = open_link("ablation", {"text": TEXT, "model": "decoder", "heads": "1-5,12-5",
                                "ko_keys": "0,2"})
    heads, keys = at.multiselect(key="ablation_heads"), at.multiselect(key="ablation_ko_keys")
    assert heads.value == ["1-5", "12-5"] and keys.value == [0, 2]
    assert (at.query_params["heads"], at.query_params["ko_keys"]) == ("1-5,12-5", "0,2")
    assert "with 2 head(s) ablated" in shown(" ".join(metric.label for metric in at.metric))
    heads.set_value(["1-5"])
    rerun(at)
    assert at.query_params["heads"] == "1-5"
    again = open_link("ablation", dict(at.query_params))
    assert again.multiselect(key="ablation_heads").value == ["1-5"]
    assert again.multiselect(key="ablation_ko_keys").value == [0, 2]
    at.multiselect(key="ablation_heads").set_value([])
    rerun(at)
    assert "heads" not in at.query_params  # nothing chosen: nothing to write


def test_typing_a_heads_name_and_enter_picks_that_head_only():
    """Streamlit's multiselect offers "Select N matches" first while the user types, so Enter
    took every head whose name matched; the ablation page turns that option off and matches
    what was typed as a substring ("layer 1 · head 5" is then one head, not layer 10's too)."""
    at = open_link("ablation", {"text": TEXT, "model": "decoder"})
    contains = MultiSelect.DESCRIPTOR.fields_by_name["filter_mode"].enum_type.values_by_name[
        "FILTER_MODE_CONTAINS"].number
    for key in ("ablation_heads", "ablation_ko_keys"):
        proto = at.multiselect(key=key).proto
        assert proto.select_all == 0 and proto.filter_mode == contains
    labels = at.multiselect(key="ablation_heads").options
    assert [label for label in labels if "layer 1 · head 5" in label] == ["layer 1 · head 5"]


def test_a_multiselect_choice_the_page_does_not_have_is_left_out_with_a_note():
    at = open_link("ablation", {"text": TEXT, "model": "decoder", "heads": "1-5,99-1"})
    assert "heads=1-5,99-1" in texts(at)
    assert at.multiselect(key="ablation_heads").value in ([], ["1-5"])
