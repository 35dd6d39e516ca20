"""Slide decks: files and links read back to the same deck, every bad file is one sentence, the
shipped decks open real views, and the deck page presents, steps, builds and warms up a deck."""

from __future__ import annotations

import json
import tomllib
import zlib
from pathlib import Path

import pytest

from models.limits import DECK_BYTES, DECK_SLIDES
from models.teaching import decks
from models.teaching.decks import (CODE_VERSION, Deck, DeckError, Slide, deck_from_code,
                                   deck_to_code, deck_to_json, deck_to_toml, read_deck)
from streamlit.testing.v1 import AppTest
from tests.app_support import APP, TIMEOUT_S, assert_no_failure, figures, texts
from ui.link_codec import SHARED
from ui.link_controls import page_controls

ROOT = Path(__file__).resolve().parents[2]
PAGES = {path.stem for path in (ROOT / "pages").glob("*.py")} - {"deck"} | {""}
AWKWARD = 'Quotes " and \\ backslashes,\nnew lines\ttabs, \x7f, ünïcode, 𝛼 and “curly” [[x]]'
DECK = Deck(title=AWKWARD, description="two slides", slides=(
    Slide(view="scaling?text=Time+flies&dk=10", title="d = 10", note=AWKWARD,
          figure="scaling_bars"),
    Slide(view="?text=%3Cb%3E&layer=2"),
))


def test_a_deck_reads_back_the_same_from_toml_json_and_a_link():
    toml_text = deck_to_toml(DECK)
    assert tomllib.loads(toml_text)["title"] == AWKWARD  # a real TOML parser agrees
    assert read_deck(toml_text.encode(), "lecture.toml", PAGES) == DECK
    assert read_deck(deck_to_json(DECK).encode(), "lecture.json", PAGES) == DECK
    code = deck_to_code(DECK)
    assert code.startswith(CODE_VERSION) and all(c.isalnum() or c in "-_." for c in code)
    assert deck_from_code(code, PAGES) == DECK
    assert DECK.slides[0].page == "scaling" and DECK.slides[0].query == {"text": "Time flies",
                                                                          "dk": "10"}


def test_moving_removing_and_editing_slides():
    three = decks.added(DECK, Slide(view="rollout?text=x", title="third"))
    assert [s.title for s in decks.moved(three, 2, -1).slides] == ["d = 10", "third", ""]
    assert [s.title for s in decks.moved(three, 0, -5).slides] == ["d = 10", "", "third"]
    assert [s.title for s in decks.moved(three, 0, 99).slides] == ["", "third", "d = 10"]
    assert [s.title for s in decks.removed(three, 1).slides] == ["d = 10", "third"]
    renamed = decks.edited(three, 2, "new", "said")
    assert (renamed.slides[2].title, renamed.slides[2].note) == ("new", "said")
    full = Deck("full", tuple(Slide(view="rollout") for _ in range(DECK_SLIDES)))
    with pytest.raises(DeckError, match=f"at most {DECK_SLIDES} slides"):
        decks.added(full, Slide(view="rollout"))


BAD_FILES = [
    ("deck.toml", b"title = 'x'\n[[slides]\nview = 'rollout'", "is not valid TOML"),
    ("deck.json", b'{"title": "x", "slides": [', "is not valid JSON"),
    ("deck.toml", b"\xff\xfe not text", "is not UTF-8 text"),
    ("deck.toml", b"title = 'x'", "has no slides"),
    ("deck.toml", b"title = 'x'\nslides = 3", "has no slides"),
    ("deck.toml", b"title = 'x'\n[[slides]]\ntitle = 'y'", "Slide 1 has no view"),
    ("deck.toml", b"[[slides]]\nview = 'rollout'\n[[slides]]\nview = 'nowhere?x=1'",
     "Slide 2's view names the page 'nowhere', which this app does not have"),
    ("deck.toml", b"[[slides]]\nview = '../../etc/passwd'", "which this app does not have"),
    ("deck.toml", b"[[slides]]\nview = 'rollout'\nspeed = 3", "a field this app does not read"),
    ("deck.toml", b"[[slides]]\nview = 'rollout'\nnote = 3", "Slide 1's note must be text"),
    ("deck.toml", b"[[slides]]\nview = 'rollout'\nfigure = 'a b'", "must be a chart key"),
    ("deck.toml", b"[[slides]]\nview = 'rollout?=&&'", "not name=value pairs"),
    ("deck.json", b"[1, 2]", "must be a table"),
    ("deck.json", b"[" * 100_000, "is not valid JSON"),
    ("deck.toml", b"title = '" + b"x" * 300 + b"'\n[[slides]]\nview = 'rollout'",
     "longer than 200 characters"),
    ("deck.toml", b"[[slides]]\nview = 'rollout'\n" * (DECK_SLIDES + 1), "at most"),
    ("deck.toml", b"#" * (DECK_BYTES + 1), "larger than"),
]


@pytest.mark.parametrize("name, content, words", BAD_FILES)
def test_every_bad_file_is_one_sentence(name, content, words):
    with pytest.raises(DeckError) as caught:
        read_deck(content, name, PAGES)
    message = str(caught.value)
    assert words in message
    assert "\n" not in message and message.endswith(".") and "Traceback" not in message


def test_a_damaged_or_oversized_link_is_one_sentence():
    code = deck_to_code(DECK)
    for damaged in (code[:-7], code[:3] + "!!" + code[5:], "d9." + code[3:], ""):
        with pytest.raises(DeckError, match="^The link's deck"):
            deck_from_code(damaged, PAGES)
    bomb = zlib.compress(json.dumps({"title": "x" * (DECK_BYTES * 4)}).encode(), 9)
    import base64
    packed = CODE_VERSION + base64.urlsafe_b64encode(bomb).decode().rstrip("=")
    with pytest.raises(DeckError, match="larger than a deck may be"):
        deck_from_code(packed, PAGES)


@pytest.mark.parametrize("path", sorted((ROOT / "decks").glob("*.toml")), ids=lambda p: p.stem)
def test_each_shipped_deck_opens_real_views_with_settings_the_pages_have(path):
    deck = read_deck(path.read_bytes(), path.name, PAGES)
    assert deck.title.startswith("Chapter") and len(deck.slides) >= 2
    for slide in deck.slides:
        controls = page_controls(ROOT / "pages" / f"{slide.page or 'attention_maps'}.py")
        query = slide.query
        assert query.get("present") == "true" and query["text"]
        unknown = {name for name in query if name not in SHARED
                   and not controls.kind_of(controls.key_of(name))}
        assert not unknown, (slide.title, unknown)
        assert slide.title and slide.note
    assert len(list((ROOT / "decks").glob("*.toml"))) == 5  # one per chapter


# --- the page -----------------------------------------------------------------------------------

def _deck_page(state: dict | None = None, query: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    for key, value in (state or {}).items():
        at.session_state[key] = value
    at.query_params.update(query or {})
    at.switch_page("pages/deck.py")
    at.run()
    assert_no_failure(at)
    return at


def _bar(at: AppTest) -> str:
    return next(m.value for m in at.markdown if "slide " in str(m.value) and " of " in
                str(m.value))


def test_presenting_steps_through_the_slides_and_back():
    at = _deck_page()
    assert at.title[0].value == "Slide decks"
    at.selectbox(key="deck_choice").set_value("chapter-0").run()
    at.button(key="deck_present").click().run()
    assert_no_failure(at)
    assert at.title[0].value == "Why attention is scaled"
    assert "slide 1 of 8" in _bar(at) and at.button(key="deck_previous").disabled
    assert at.query_params["dk"] == "10" and at.session_state["sb_presenter"] is True
    at.button(key="deck_next").click().run()
    assert_no_failure(at)
    assert "slide 2 of 8" in _bar(at) and at.query_params["dk"] == "10000"
    at.button(key="deck_note").click()
    at.switch_page("pages/scaling.py")  # AppTest reruns the page it was switched to, not the
    at.run()                            # one the script switched to, as a browser would
    assert "√1000" in texts(at) and "slide 2 of 8" in _bar(at)
    at.button(key="deck_next").click().run()
    assert at.title[0].value == "Attention maps" and at.query_params["head"] == "5"
    at.button(key="deck_previous").click().run()
    assert at.title[0].value == "Why attention is scaled" and "slide 2 of 8" in _bar(at)
    at.button(key="deck_end").click().run()
    assert_no_failure(at)
    assert at.title[0].value == "Slide decks"


def _titles(at: AppTest) -> list[str]:
    return [str(spec["layout"].get("title", {}).get("text", "")) for spec in figures(at)]


def test_a_slide_draws_its_own_figure_and_the_pages_others_on_request():
    at = _deck_page()
    at.selectbox(key="deck_choice").set_value("chapter-1").run()
    at.button(key="deck_present").click().run()
    assert_no_failure(at)
    assert at.title[0].value == "Attention maps" and "slide 1 of 5" in _bar(at)
    assert any("Head 0" in title for title in _titles(at))  # the slide's figure, drawn
    assert not any("All 12 heads" in title for title in _titles(at))
    unfold = at.button(key="maps_grid_unfold")  # the page's other figure: a button
    assert "All 12 heads of layer 0" in unfold.label
    unfold.click()
    at.switch_page("pages/attention_maps.py")  # see test_presenting_steps_through_the_slides_and_back
    at.run()
    assert_no_failure(at)
    assert at.title[0].value == "Attention maps" and "slide 1 of 5" in _bar(at)
    assert any("All 12 heads" in title for title in _titles(at))
    assert not [b for b in at.button if b.key == "maps_grid_unfold"]
    at.button(key="deck_next").click()
    at.switch_page("pages/compare.py")  # see test_presenting_steps_through_the_slides_and_back
    at.run()
    assert "slide 2 of 5" in _bar(at) and _titles(at)
    at.button(key="deck_next").click()
    at.switch_page("pages/bertviz_views.py")
    at.run()
    # the title as typed: Markdown's own escape, not an HTML entity shown as text
    assert "slide 3 of 5 · The pair in bertviz\\'s head view" in _bar(at)
    at.button(key="deck_end").click().run()
    at.switch_page("pages/attention_maps.py")  # not presenting: every figure drawn at once
    at.run()
    assert_no_failure(at)
    assert any("All 12 heads" in title for title in _titles(at))
    assert not [b for b in at.button if str(b.key).endswith("_unfold")]


def test_a_view_added_in_the_sidebar_becomes_a_slide_and_the_deck_travels_as_a_link():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.query_params.update({"text": "Dogs bark.", "dk": "100"})
    at.switch_page("pages/scaling.py")
    at.run()
    at.button(key="deck_add_view").click().run()
    assert_no_failure(at)
    assert "Added as slide 1" in texts(at)
    slide = at.session_state["deck_draft"].slides[0]
    assert slide.title == "Why attention is scaled"
    assert slide.page == "scaling" and slide.query["text"] == "Dogs bark." \
        and slide.query["dk"] == "100"
    at.switch_page("pages/deck.py")
    at.run()
    at.selectbox(key="deck_choice").set_value("mine").run()
    assert at.text_input(key="deck_slide_title_0").value == "Why attention is scaled"
    code = at.get("code")
    link = next(c.value for c in code if "deck?deck=" in c.value)
    shared = _deck_page(query={"deck": link.split("deck=", 1)[1]})
    assert "The deck from the link is now your deck" in texts(shared)
    assert shared.session_state["deck_draft"].slides == (slide,)
    broken = _deck_page(query={"deck": "d1.nonsense"})
    assert "The link's deck is damaged" in texts(broken)


def test_warming_up_walks_every_slide_and_reports_each():
    deck = Deck("two", (Slide(view="scaling?text=Hi.&dk=10", title="one"),
                        Slide(view="rollout?text=Hi.", title="two")))
    at = _deck_page(state={"deck_draft": deck})
    at.selectbox(key="deck_choice").set_value("mine").run()
    at.button(key="deck_warm").click().run()
    assert_no_failure(at)
    assert at.title[0].value == "Slide decks"
    assert "Warmed up 2 slides" in texts(at)
    table = at.dataframe[0].value  # the only table of "mine": the warm-up's times
    assert list(table["title"]) == ["one", "two"] and (table["seconds"] >= 0).all()
