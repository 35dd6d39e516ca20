"""The start page's section on teaching (ui/start.py): one link per lesson and one per chapter
deck, each opening its lesson's first step or the deck page on its deck, presenter mode kept."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs

import pytest
from streamlit.testing.v1 import AppTest

from tests.app_support import APP, TIMEOUT_S, assert_no_failure, run_page
from ui.charts import PRESENTER
from ui.decks import shipped
from ui.lessons import LESSONS

ROOT = Path(__file__).resolve().parents[2]
DECK_FILES = sorted((ROOT / "decks").glob("*.toml"))


def start_links(at: AppTest) -> dict[str, tuple[str, dict[str, str]]]:
    """The main area's page links, by label: (page url path, query)."""
    found = {}
    for link in at.main.get("page_link"):
        query = {name: values[-1] for name, values in parse_qs(link.proto.query_string).items()}
        found[link.proto.label] = (link.proto.page, query)
    return found


@pytest.fixture(scope="module")
def start() -> AppTest:
    at = run_page(text="The start page's own sentence.")
    assert at.title[0].value == "Attention maps"  # app.py's first page
    return at


def test_every_lesson_has_a_link_to_its_first_step(start):
    links = start_links(start)
    lesson_links = {label: query for label, (page, query) in links.items() if page == "lessons"}
    assert list(lesson_links) == [lesson.title for lesson in LESSONS]  # all, in the lessons' order
    for lesson in LESSONS:
        query = lesson_links[lesson.title]
        assert (query["lesson"], query["step"]) == (lesson.key, "1")
        assert query["text"] == "The start page's own sentence."


def test_every_chapter_deck_has_a_link_that_opens_the_deck_page_on_it(start):
    links = start_links(start)
    deck_links = {query["choice"]: label for label, (page, query) in links.items()
                  if page == "deck"}
    assert sorted(deck_links) == [path.stem for path in DECK_FILES] and len(DECK_FILES) >= 5
    for name, label in deck_links.items():
        query = links[label][1]
        at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
        at.query_params.update(query)
        at.switch_page("pages/deck.py")
        at.run()
        assert_no_failure(at)
        assert at.session_state["deck_choice"] == name
        deck = shipped()[name]
        assert label == f"{deck.title} ({len(deck.slides)} slides)"
        assert at.title[0].value == "Slide decks"
        assert at.dataframe[0].value["title"].tolist() == [slide.title for slide in deck.slides]


@pytest.mark.parametrize("lesson", ["scaling", "finetune"])
def test_a_lesson_link_opens_that_lesson(start, lesson):
    label = next(l.title for l in LESSONS if l.key == lesson)
    page, query = start_links(start)[label]
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.query_params.update(query)
    at.switch_page(f"pages/{page}.py")
    at.run()
    assert_no_failure(at)
    assert at.title[0].value == "Lessons"
    assert (at.session_state["lessons_lesson"], at.session_state["lessons_step"]) == (lesson, 1)
    assert at.sidebar.text_area[0].value == "The start page's own sentence."


def test_links_keep_presenter_mode():
    at = run_page(state={PRESENTER: True})
    queries = [query for page, query in start_links(at).values() if page in ("lessons", "deck")]
    assert len(queries) == len(LESSONS) + len(DECK_FILES)
    assert all(query.get("present") == "true" for query in queries)


def test_presenter_mode_opens_on_the_map_and_puts_the_section_after_it():
    """In presenter mode the map is a projector's first screen: the section follows the head's
    map and its downloads (otherwise it comes first, under the title)."""
    def order(at: AppTest) -> list[str]:
        return [getattr(child, "label", None) or child.type for child in at.main.children.values()]

    start_here = f"Start here: {len(LESSONS)} guided lessons and {len(DECK_FILES)} slide decks, " \
                 "one per chapter"
    plain, presenting = order(run_page()), order(run_page(state={PRESENTER: True}))
    assert plain.index(start_here) == plain.index("title") + 1
    assert presenting.index(start_here) > presenting.index("Download this figure: HTML, SVG, "
                                                           "PDF, PNG")
    assert presenting.index(start_here) < presenting.index("plotly_chart")  # the layer's grid
