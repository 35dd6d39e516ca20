"""Every choice a page offers in its own column draws without a failure: each page of the menu is
opened, then each of its select boxes and radio buttons is set, one after another, to its second,
middle and last option (every option when it has four or fewer) and each of its switches is
flipped, the page running again after each change. A choice the page offers and cannot draw
(the head statistics' norm-based columns once were) would put app.py's guard message on the
page. The sidebar's controls have tests of their own (tests/pages/test_links.py and the page
tests)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1.element_tree import TESTING_KEY

from tests.app_support import assert_no_failure, navigation_pages, run_page

# Pages whose own controls differ on the causal decoder: they are also walked with it chosen.
# (Activation patching is left out: each of its sites is a patching grid of its own, drawn by
# tests/interventions/test_pages.py.)
DECODER_PAGES = ("ablation", "logit_lens", "predictions")


def labelled(widget):
    """The widget with AppTest choosing its options by the labels the page shows: AppTest looks a
    value up through the page's format_func, which turns a label into nothing it lists."""
    widget.root.session_state[TESTING_KEY][widget.id] = lambda label: label
    return widget


def own_choices(at) -> list[tuple[str, str]]:
    """(kind, key) of the page's own select boxes, radio buttons and switches."""
    widgets = list(at.selectbox) + list(at.radio) + list(at.toggle)
    return [(widget.type, widget.key) for widget in widgets
            if widget.key and not widget.key.startswith("sb_")]


def find(at, kind: str, key: str):
    """The page's widget of that kind and key, or None once another choice has removed it."""
    try:
        return getattr(at, kind)(key=key)
    except KeyError:
        return None


def walk_choices(at) -> int:
    """Make every choice of the page in turn (the page running again after each); how many runs."""
    runs = 0
    for kind, key in own_choices(at):
        widget = find(at, kind, key)
        if widget is None:
            continue
        if kind == "toggle":
            values = [not widget.value]
        else:
            options = list(widget.options)
            values = options if len(options) <= 4 else [options[1], options[len(options) // 2],
                                                         options[-1]]
        for value in values:
            widget = find(at, kind, key)
            if widget is None:
                break
            (labelled(widget) if kind != "toggle" else widget).set_value(value)
            at.run()
            assert_no_failure(at)
            runs += 1
    return runs


@pytest.mark.parametrize("path", navigation_pages(), ids=lambda path: Path(path).stem)
def test_every_choice_of_the_page_draws(path):
    walk_choices(run_page(Path(path).stem))


@pytest.mark.parametrize("page", DECODER_PAGES)
def test_every_choice_of_the_page_draws_on_the_decoder(page):
    assert walk_choices(run_page(page, state={"sb_kind": "decoder"})) >= 1


def test_the_walk_sees_the_head_statistics_columns():
    """The walk reaches the norm-based columns (the last options) on the default encoder."""
    at = run_page("head_statistics")
    columns = at.selectbox(key="stats_column").options
    assert columns[-2:] == ["norm_cls", "norm_sep"]
    assert walk_choices(at) == 3
    assert at.selectbox(key="stats_column").value == "norm_sep"
