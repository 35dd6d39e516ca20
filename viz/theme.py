"""The presenter theme (large dark text that fits a projected 1280 x 720 screen: titles,
notes and axis titles wrapped, tick labels thinned, rows spaced, viz/presenter_room.py) and the colour-blind-safe
palette applied to a copy of a figure, and the readable text colours every shown figure gets."""

from __future__ import annotations

import re

import plotly.graph_objects as go

from viz.palettes import contrast_on_white, safe_colours
from viz.presenter_room import (axes, place_notes, place_subplot_titles, place_title, space_rows,
                                thin_ticks)
from viz.style import (FIGURE_TEXT_COLOR, PALETTES, PRESENTER_AXIS_TITLE_CHARS,
                       PRESENTER_AXIS_TITLE_PX, PRESENTER_FONT_PX, PRESENTER_MAX_HEIGHT_PX,
                       PRESENTER_TEXT_COLOR, PRESENTER_TITLE_PX, SAFE_PALETTE, STANDARD_PALETTE,
                       wrapped)


def untouched_copy(figure: go.Figure) -> go.Figure:
    """A copy of `figure` made by only reading it. Plotly's own copy, go.Figure(figure), takes
    each trace's "type" out of the original's properties and puts it back (plotly 7.1,
    _plotly_utils.basevalidators.BaseDataValidator.validate_coerce); a figure shared between
    sessions (ui/kept.py) that another session serialises meanwhile raised "dictionary changed
    size during iteration" on the server (two sessions opening the attention maps at once), and
    could be read without its type. This copy is built from deep copies of the traces', layout's
    and frames' properties instead (their public to_plotly_json)."""
    return go.Figure(data=[trace.to_plotly_json() for trace in figure.data],
                     layout=figure.layout.to_plotly_json(),
                     frames=[frame.to_plotly_json() for frame in figure.frames])


def themed(figure: go.Figure, presenter: bool, palette: str = STANDARD_PALETTE) -> go.Figure:
    """A copy of `figure` in presenter style (large dark text) and/or the colour-blind-safe
    palette; the figure itself is returned when neither is asked for."""
    if palette not in PALETTES:
        raise ValueError(f"Unknown palette {palette!r}; choose one of {', '.join(PALETTES)}.")
    if not presenter and palette == STANDARD_PALETTE:
        return figure
    result = untouched_copy(figure)
    if presenter:
        _presenter_text(result)
    if palette == SAFE_PALETTE:
        safe_colours(result)
    return result


def as_drawn(figure: go.Figure, presenter: bool, palette: str = STANDARD_PALETTE) -> go.Figure:
    """`figure` as every front draws it (the page, its downloads, the command line's files):
    themed for presenter mode and the palette, its text readable."""
    return readable_text(themed(figure, presenter, palette))


def readable_text(figure: go.Figure) -> go.Figure:
    """A copy of `figure` whose axis, legend, colour-bar and annotation text without a colour of
    its own is FIGURE_TEXT_COLOR (WCAG AA contrast on white); colours already set (presenter
    mode's, a figure's own) stay, and so do titles (Streamlit draws them in its heading colour)
    and text written on cells and bars. A colour bar's title without a side of its own runs
    along the bar's right, clear of its tick labels."""
    result = untouched_copy(figure)
    layout = result.layout
    layout.font.color = layout.font.color or FIGURE_TEXT_COLOR
    layout.legend.font.color = layout.legend.font.color or FIGURE_TEXT_COLOR
    layout.legend.title.font.color = layout.legend.title.font.color or FIGURE_TEXT_COLOR
    for axis in axes(result):
        axis.tickfont.color = axis.tickfont.color or FIGURE_TEXT_COLOR
        axis.title.font.color = axis.title.font.color or FIGURE_TEXT_COLOR
    for bar in _colorbars(result):
        bar.tickfont.color = bar.tickfont.color or FIGURE_TEXT_COLOR
        bar.title.font.color = bar.title.font.color or FIGURE_TEXT_COLOR
        if bar.title.text and bar.title.side is None:  # on top it meets the top tick label
            bar.title.side = "right"
    for annotation in layout.annotations:
        annotation.font.color = annotation.font.color or FIGURE_TEXT_COLOR
    return result


# --- presenter text ---------------------------------------------------------------------------

def _at_least(size, minimum: float) -> float:
    return minimum if size is None else max(size, minimum)


def _colorbars(figure: go.Figure) -> list:
    bars = [figure.layout[name].colorbar for name in figure.layout
            if re.fullmatch(r"coloraxis\d*", name)]
    for trace in figure.data:
        if "colorbar" in trace:
            bars.append(trace.colorbar)
        marker = trace.marker if "marker" in trace else None
        if marker is not None and "colorbar" in marker and _uses_colour_scale(marker):
            bars.append(marker.colorbar)  # touching an unused one would make the browser draw it
    return bars


def _uses_colour_scale(marker) -> bool:
    """Whether a bar/scatter marker maps numbers to colours (only then has it a colour bar)."""
    return bool(marker.showscale) or (marker.colorscale is not None and marker.color is not None
                                      and not isinstance(marker.color, str)
                                      and all(isinstance(c, (int, float)) for c in marker.color))


def _fit_screen(figure: go.Figure) -> None:
    """Shrink a figure taller than a projected screen allows, keeping its proportions."""
    layout = figure.layout
    if layout.height is None or layout.height <= PRESENTER_MAX_HEIGHT_PX:
        return
    factor = PRESENTER_MAX_HEIGHT_PX / layout.height
    layout.height = PRESENTER_MAX_HEIGHT_PX
    if layout.width is not None:
        layout.width = round(layout.width * factor)


def _presenter_text(figure: go.Figure) -> None:
    _fit_screen(figure)
    layout = figure.layout
    dark = PRESENTER_TEXT_COLOR
    layout.font.size = _at_least(layout.font.size, PRESENTER_FONT_PX)
    layout.font.color = dark
    layout.title.font.size = _at_least(layout.title.font.size, PRESENTER_TITLE_PX)
    layout.title.font.color = dark
    layout.legend.font.size = _at_least(layout.legend.font.size, PRESENTER_FONT_PX)
    layout.legend.font.color = dark
    layout.hoverlabel.font.size = _at_least(layout.hoverlabel.font.size, PRESENTER_FONT_PX)
    for axis in axes(figure):
        axis.tickfont.size = _at_least(axis.tickfont.size, PRESENTER_FONT_PX)
        axis.tickfont.color = dark
        axis.title.font.size = _at_least(axis.title.font.size, PRESENTER_AXIS_TITLE_PX)
        axis.title.font.color = dark
        if axis.plotly_name.startswith("y") and axis.title.text:  # along a short plot's side
            axis.title.text = wrapped(axis.title.text, PRESENTER_AXIS_TITLE_CHARS)
        axis.automargin = True
        thin_ticks(figure, axis)
    for bar in _colorbars(figure):
        bar.tickfont.size = _at_least(bar.tickfont.size, PRESENTER_FONT_PX)
        bar.tickfont.color = dark
        bar.title.font.size = _at_least(bar.title.font.size, PRESENTER_FONT_PX)
        bar.title.font.color = dark
        bar.title.side = "right"  # on top, the large title meets the top tick label
    for annotation in layout.annotations:
        annotation.font.size = _at_least(annotation.font.size, PRESENTER_FONT_PX)
        if annotation.font.color is None or contrast_on_white(annotation.font.color) < 7:
            annotation.font.color = dark
    for trace in figure.data:
        if trace.type in ("bar", "scatter") and "textfont" in trace and trace.text is not None:
            trace.textfont.size = _at_least(trace.textfont.size, PRESENTER_FONT_PX)
    place_subplot_titles(figure)
    place_title(figure)
    place_notes(figure)
    space_rows(figure)
