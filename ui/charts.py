"""The one way a page draws a Plotly figure: themed for presenter mode and the chosen palette,
with a toolbar camera button that saves it as PNG or SVG, drawn by plotly.js in the browser
(nothing is fetched)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import plotly.graph_objects as go
import plotly.utils
import streamlit as st

from models.store import stores
from models.store.keys import result_key
from ui.byte_caches import kept
from viz.describe import describe, figure_title
from viz.style import SAFE_PALETTE, STANDARD_PALETTE
from viz.theme import as_drawn

# Session keys of the sidebar's Presenter section (ui.state.sidebar draws the widgets)
PRESENTER = "sb_presenter"
PALETTE_SAFE = "sb_palette_safe"
FIGURE_FORMAT = "sb_figure_format"
FORMATS = ("PNG", "SVG")
PNG_SCALE = 2  # PNG downloads at twice the screen resolution, sharp on slides
# While a deck presents a slide that names its main figure, ui/decks sets this (per run) to that
# figure's key; the page's other figures then wait behind a button each (see `folded`).
SLIDE_FIGURE = "deck_slide_figure"
UNFOLDED = "deck_unfolded"  # session key: the other figures drawn on request on this slide


@dataclass(frozen=True)
class Presentation:
    """How figures are shown and saved."""

    presenter: bool
    palette: str
    figure_format: str  # "PNG" or "SVG"


def presentation() -> Presentation:
    state = st.session_state
    chosen = state.get(FIGURE_FORMAT, FORMATS[0])
    return Presentation(
        presenter=bool(state.get(PRESENTER)),
        palette=SAFE_PALETTE if state.get(PALETTE_SAFE) else STANDARD_PALETTE,
        figure_format=chosen if chosen in FORMATS else FORMATS[0],
    )


def chart_config(key: str, figure_format: str) -> dict:
    """Plotly's config: the camera button saves `<key>.png` (at scale 2) or `<key>.svg`."""
    image = {"format": figure_format.lower(), "filename": key}
    if figure_format == "PNG":
        image["scale"] = PNG_SCALE
    return {"toImageButtonOptions": image, "displaylogo": False}


@dataclass(frozen=True)
class Shown:
    """A figure as drawn (themed, readable), and the size of its JSON (what the store counts)."""

    figure: go.Figure
    spec_bytes: int

    @property
    def nbytes(self) -> int:
        return self.spec_bytes


def shown_figure(figure: go.Figure, settings: Presentation) -> go.Figure:
    """`figure` themed for `settings` and with readable text, kept in the figures store by what
    the figure is: restyling a figure walks every property through Plotly's validators (about
    half a warmed page's run), so a view seen before (a warmed deck's slide) skips it. The figure
    returned is shared between sessions: draw it, never change it. The key is the figure's JSON
    with its keys sorted: Plotly writes a trace's properties in the order they were last set,
    which a figure made of subplots changes after its first serialisation."""
    spec = json.dumps(figure.to_plotly_json(), cls=plotly.utils.PlotlyJSONEncoder,
                      sort_keys=True, separators=(",", ":"))  # one serialisation, keys sorted
    key = result_key("shown figure", hashlib.sha256(spec.encode()).hexdigest(),
                     settings.presenter, settings.palette)
    return kept(stores.FIGURES, key, lambda: Shown(
        as_drawn(figure, settings.presenter, settings.palette), len(spec))).figure


def show(figure: go.Figure, key: str, container=st, **plotly_chart_kwargs):
    """Draw `figure` in `container` (a column, a tab, the page) as the sidebar asks, named for
    screen readers by its text alternative (its title and what it shows, viz.describe)."""
    if folded(figure, key, container):
        return None
    settings = presentation()
    shown = shown_figure(figure, settings)
    config = {**chart_config(key, settings.figure_format), **plotly_chart_kwargs.pop("config", {})}
    alt = plotly_chart_kwargs.pop("alt", None) or describe(figure)
    return container.plotly_chart(shown, key=key, config=config, alt=alt, **plotly_chart_kwargs)


def folded(figure: go.Figure, key: str, container=st) -> bool:
    """While a deck presents a slide, the page's figures other than the slide's own are a button
    each that draws it: the slide paints one figure (in about the time of a one-figure page)
    instead of every figure of its page, and nothing is out of reach. Whether `figure` was
    folded so (the button drawn in its place)."""
    state = st.session_state
    main = state.get(SLIDE_FIGURE)
    if not main or key == main or key in state.get(UNFOLDED, ()):
        return False
    container.button(f"Show “{figure_title(figure)}”", key=f"{key}_unfold",
                     icon=":material/bar_chart:", on_click=_unfold, args=(key,),
                     help="This slide shows its own figure; the page's other figures are drawn "
                          "when asked.")
    return True


def _unfold(key: str) -> None:
    st.session_state[UNFOLDED] = st.session_state.get(UNFOLDED, frozenset()) | {key}
