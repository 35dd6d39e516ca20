"""Slide decks in the app: presenting one slide at a time, and warming a deck up before class
(the deck itself is models/teaching/decks.py; building one is ui/deck_editor.py; the page is
pages/deck.py).

Presenting a slide opens its view: the slide's page with its link's query, through the same
reading of links as any other link (ui/links.py). Above the page a bar shows the deck's place,
Previous and Next (the arrow keys and Page Up/Down press them), the speaker's note on request and
the way back to the deck. A small script in the page (no iframe, nothing fetched) presses the
buttons for the keys, collapses the sidebar and scrolls the slide's main figure onto the screen.
Moving on stays in the browser's page and its Streamlit session: a button's callback asks for the
slide, and the next run opens it before the page is drawn (`_open_requested`) with
st.switch_page: a rerun of the same session that changes the address bar and loads no document.
A slide that names its main figure draws that one; the page's other figures wait behind a button
each (ui/charts.folded).

Warming up walks the deck once, as presenting it would: every slide's page runs with its view,
so every model, trace, generation and training it needs is made and kept in the server's caches
(shared by every session); a slide then paints as fast as a cached view. A progress bar above
each slide shows how far the walk is; at the end the deck page says how long each slide took.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import streamlit as st
from streamlit.runtime.scriptrunner_utils.exceptions import RerunException, StopException

from models.errors import ModelLoadError, first_sentence
from models.loading.pretrained import DEFAULT_MODEL
from models.teaching.decks import Deck, Slide, read_deck
from ui.charts import PRESENTER, SLIDE_FIGURE, UNFOLDED
from ui.link_controls import PAGES
from ui.state import MODEL_NAME
from ui.text import plain

ROOT = Path(__file__).resolve().parents[1]
DECKS = ROOT / "decks"
DECK_PAGE = "pages/deck.py"
SHOWING = "deck_showing"  # session key: the deck being presented, and where
REQUEST = "deck_request"  # session key: the slide a button asked to open (callbacks cannot switch)
WARMING = "deck_warming"  # session key: a warm-up walking the deck
WARMED = "deck_warmed"  # session key: what the last warm-up measured
CHOICE = "deck_choice"  # the deck page's choice of deck (its selectbox's key)
RETURN_CHOICE = "deck_return_choice"  # session key: the choice to restore on the deck page
NOT_SLIDES = {"deck"}  # pages a slide cannot show
logger = logging.getLogger("attention_explorer")
HEADER_PX = 64  # Streamlit's top bar: a figure scrolled to the top lands below it


def slide_pages() -> set[str]:
    """The url paths a slide may name: every page's file name, and "" for the default page."""
    return {path.stem for path in PAGES.glob("*.py")} - NOT_SLIDES | {""}


def page_file(slide: Slide) -> str:
    return f"pages/{slide.page or 'attention_maps'}.py"


def shipped() -> dict[str, Deck]:
    """The decks in decks/, by file name without the extension, in name order."""
    pages = slide_pages()
    return {path.stem: read_deck(path.read_bytes(), path.name, pages)
            for path in sorted(DECKS.glob("*.toml"))}


# --- presenting -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Showing:
    deck: Deck
    index: int = 0
    note: bool = False


@dataclass
class Warming:
    deck: Deck
    index: int = 0
    started: float = field(default_factory=time.monotonic)
    seconds: list[float] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)


def present(deck: Deck, index: int = 0) -> None:
    """Button callback: present `deck` from slide `index`, in presenter mode."""
    st.session_state[SHOWING] = Showing(deck, index)
    st.session_state.pop(UNFOLDED, None)
    st.session_state[PRESENTER] = True
    st.session_state[RETURN_CHOICE] = st.session_state.get(CHOICE)
    st.session_state[REQUEST] = deck.slides[index]


def warm_up(deck: Deck) -> None:
    """Button callback: walk every slide of `deck` once (see the module's docstring)."""
    st.session_state.pop(SHOWING, None)
    st.session_state[WARMING] = Warming(deck)
    st.session_state[RETURN_CHOICE] = st.session_state.get(CHOICE)
    st.session_state[REQUEST] = deck.slides[0]


def _step(offset: int) -> None:
    showing = st.session_state.get(SHOWING)
    if showing is None:
        return
    index = max(0, min(len(showing.deck.slides) - 1, showing.index + offset))
    st.session_state[SHOWING] = replace(showing, index=index)
    st.session_state.pop(UNFOLDED, None)
    st.session_state[REQUEST] = showing.deck.slides[index]


def _toggle_note() -> None:
    showing = st.session_state.get(SHOWING)
    if showing is not None:
        st.session_state[SHOWING] = replace(showing, note=not showing.note)


def _end() -> None:
    st.session_state.pop(SHOWING, None)
    st.session_state[REQUEST] = None  # back to the deck page


def _open_requested() -> None:
    """Open the slide (or the deck page) a button asked for (Streamlit's switch_page: a rerun in
    the same session)."""
    if REQUEST not in st.session_state:
        return
    slide = st.session_state.pop(REQUEST)
    if slide is None:  # back on the deck page, the deck just presented or warmed is chosen
        # again (the other pages' runs forget the selectbox's value)
        choice = st.session_state.pop(RETURN_CHOICE, None)
        if choice is not None:
            st.session_state[CHOICE] = choice
        st.switch_page(DECK_PAGE)
    st.switch_page(page_file(slide), query_params=slide.query)


def _keys_script(showing: Showing) -> str:
    """The page's script for a slide: arrow keys press Previous/Next, the sidebar collapses, and
    the slide's main figure (its chart key, else the page's first figure) is scrolled on screen."""
    slide = showing.deck.slides[showing.index]
    target = f".st-key-{slide.figure}" if slide.figure else \
        "[data-testid='stPlotlyChart'], [data-testid='stIFrame'], iframe"
    settings = json.dumps({"slide": f"{showing.index}:{slide.view}", "target": target,
                           "header": HEADER_PX})
    return f"""<script>
(() => {{
  const settings = {settings};
  const doc = window.document;
  if (!window.__deckKeys) {{
    window.__deckKeys = true;
    doc.addEventListener('keydown', (event) => {{
      const field = event.target;
      if (event.altKey || event.ctrlKey || event.metaKey || (field && (field.isContentEditable
          || /^(INPUT|TEXTAREA|SELECT)$/.test(field.tagName)
          || field.getAttribute('role') === 'slider'))) return;
      const name = {{ArrowRight: 'deck_next', PageDown: 'deck_next',
                    ArrowLeft: 'deck_previous', PageUp: 'deck_previous'}}[event.key];
      const button = name && doc.querySelector(`.st-key-${{name}} button`);
      if (button && !button.disabled) {{ event.preventDefault(); button.click(); }}
    }});
  }}
  if (window.__deckSlide === settings.slide) return;
  window.__deckSlide = settings.slide;
  const sidebar = doc.querySelector('[data-testid="stSidebar"][data-collapsed="false"]');
  const collapse = doc.querySelector('[data-testid="stSidebarCollapseButton"] button');
  if (sidebar && collapse) collapse.click();
  const started = performance.now();
  const timer = setInterval(() => {{
    const app = doc.querySelector('[data-testid="stApp"]');
    const figure = doc.querySelector(settings.target);
    if (performance.now() - started > 120000 || window.__deckSlide !== settings.slide) {{
      clearInterval(timer); return;
    }}
    if (!figure || !app || app.getAttribute('data-test-script-state') !== 'notRunning') return;
    clearInterval(timer);
    setTimeout(() => {{
      const box = figure.getBoundingClientRect();
      if (box.top < settings.header || box.bottom > window.innerHeight) {{
        figure.style.scrollMarginTop = settings.header + 'px';
        figure.scrollIntoView({{block: 'start'}});
      }}
    }}, 400);
  }}, 150);
}})();
</script>"""


def _bar(showing: Showing) -> None:
    deck, index = showing.deck, showing.index
    slide = deck.slides[index]
    with st.container(key="deck_bar", horizontal=True, vertical_alignment="center"):
        st.button("Previous", key="deck_previous", icon=":material/arrow_back:",
                  disabled=index == 0, on_click=_step, args=(-1,),
                  help="Previous slide (←, Page Up)")
        st.markdown(f"**{plain(deck.title)}** · slide {index + 1} of "  # plain: shown as typed
                    f"{len(deck.slides)}" + (f" · {plain(slide.title)}"
                                             if slide.title else ""))
        st.button("Next", key="deck_next", icon=":material/arrow_forward:", type="primary",
                  disabled=index == len(deck.slides) - 1, on_click=_step, args=(1,),
                  help="Next slide (→, Page Down)")
        st.button("Hide note" if showing.note else "Note", key="deck_note",
                  icon=":material/sticky_note_2:", on_click=_toggle_note,
                  help="The speaker's note for this slide")
        st.button("End", key="deck_end", icon=":material/close:", on_click=_end,
                  help="Back to the deck")
    if showing.note:
        st.info(plain(slide.note) if slide.note else "This slide has no note.",
                icon=":material/sticky_note_2:")
    st.html(_keys_script(showing), unsafe_allow_javascript=True)


def _warming_bar(warming: Warming) -> None:
    total = len(warming.deck.slides)
    st.progress(warming.index / total, text=f"Warming up {plain(warming.deck.title)}: slide "
                                            f"{warming.index + 1} of {total}…")


def _on_slide(page, slide: Slide) -> bool:
    """Whether `page` (an st.Page) is the page of `slide`."""
    shown = "attention_maps" if page.url_path in ("", "maps_default") else page.url_path
    return shown == (slide.page or "attention_maps")


@contextlib.contextmanager
def deck_slide(page):
    """Around the page's run: the slide's bar above it while presenting (or the warm-up's
    progress), and during a warm-up, on to the next slide once the page has run (even when it
    stopped early or failed: a warm-up goes on with the rest of the deck)."""
    _open_requested()
    state = st.session_state
    warming: Warming | None = state.get(WARMING)
    showing: Showing | None = state.get(SHOWING)
    state.pop(SLIDE_FIGURE, None)
    if warming is not None:
        _warming_bar(warming)
    elif showing is not None and _on_slide(page, showing.deck.slides[showing.index]):
        _bar(showing)
        state[SLIDE_FIGURE] = showing.deck.slides[showing.index].figure  # None: fold nothing
    started = time.monotonic()
    try:
        yield
    except RerunException:  # the page asked to run again: the same slide, not the next
        raise
    except StopException:
        if warming is not None:
            _next_warm_slide(warming, time.monotonic() - started, failed=False)
        raise
    except Exception:
        if warming is not None:
            logger.exception("warming up: slide %d (%s) failed", warming.index + 1, page.url_path)
            _next_warm_slide(warming, time.monotonic() - started, failed=True)
        raise
    if warming is not None:
        _next_warm_slide(warming, time.monotonic() - started, failed=False)


def _next_warm_slide(warming: Warming, seconds: float, failed: bool) -> None:
    """Record the slide just run and open the next one (or the deck page after the last)."""
    state = st.session_state
    if state.get(WARMING) is not warming:
        return
    warming.seconds.append(seconds)
    if failed:
        warming.failed.append(warming.index)
    warming.index += 1
    if warming.index < len(warming.deck.slides):
        state[REQUEST] = warming.deck.slides[warming.index]
    else:
        state.pop(WARMING, None)
        state[WARMED] = warming
        state[REQUEST] = None
    _open_requested()


# --- the deck page's parts --------------------------------------------------------------------

WARM_ASKED = "deck_warm_asked"  # session key: the deck whose warm-up button was pressed
TRAINED_PAGES = {"fine_tuning", "lessons"}  # pages that show the fine-tuned classifier


def ask_warm_up(deck: Deck) -> None:
    st.session_state[WARM_ASKED] = deck


def warm_up_if_asked() -> None:
    """After the warm-up button: train what the deck's slides show trained (with progress),
    then walk the slides."""
    deck = st.session_state.pop(WARM_ASKED, None)
    if deck is None:
        return
    if any(slide.page in TRAINED_PAGES for slide in deck.slides):
        bar = st.progress(0.0, text="Fine-tuning the classifiers the deck shows…")
        try:
            train_lesson_classifiers(lambda fraction, message: bar.progress(
                min(fraction, 1.0), text=f"Fine-tuning: {message}"))
        except (ModelLoadError, ValueError, RuntimeError) as error:
            st.error(f"Fine-tuning failed, so its slides will wait for it: "
                     f"{first_sentence(error)}")
        bar.empty()
    warm_up(deck)
    _open_requested()


def train_lesson_classifiers(progress) -> None:
    """The two classifiers the fine-tuning page and its lesson show by default (the sidebar's
    encoder, the shipped sentences, the default epochs): trained once per server."""
    # imported here: app.py imports this module on every page, and training code is only
    # needed when a deck is warmed up
    from models.experiments.finetune import DEFAULT_EPOCHS, default_settings
    from models.experiments.finetune import PRETRAINED as PRETRAINED_ENCODER
    from models.experiments.finetune import SCRATCH as SCRATCH_ENCODER
    from models.experiments.labelled_data import load_shipped
    from ui import finetune_cache

    encoder = st.session_state.get(MODEL_NAME) or DEFAULT_MODEL
    data = load_shipped()
    for number, encoder_kind in enumerate((PRETRAINED_ENCODER, SCRATCH_ENCODER)):
        finetune_cache.trained(encoder, data, default_settings(encoder_kind, DEFAULT_EPOCHS),
                               lambda fraction, message, number=number:
                               progress((number + fraction) / 2, message))


def show_warmed() -> None:
    warming: Warming | None = st.session_state.pop(WARMED, None)
    if warming is None:
        return
    total = time.monotonic() - warming.started
    st.success(f"Warmed up {len(warming.seconds)} slides in {total:.0f} s: each is now computed "
               "and kept on this server.")
    if warming.failed:
        st.warning("These slides failed while warming up (the server log says why): "
                   + ", ".join(str(index + 1) for index in warming.failed) + ".")
    st.dataframe([{"slide": number, "title": slide.title, "seconds": round(seconds, 1)}
                  for number, (slide, seconds) in enumerate(zip(warming.deck.slides,
                                                                warming.seconds), start=1)],
                 hide_index=True, key="deck_warm_times")
