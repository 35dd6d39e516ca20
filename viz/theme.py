"""The presenter theme (large dark text that fits a projected 1280 x 720 screen: titles,
notes and axis titles wrapped, tick labels thinned, rows spaced) and the colour-blind-safe
palette applied to a copy of a figure, and the readable text colours every shown figure gets."""

from __future__ import annotations

import math
import re

import plotly.graph_objects as go

from viz.palettes import contrast_on_white, safe_colours
from viz.style import (CHAR_WIDTH, COLORBAR_ALLOWANCE_PX, FIGURE_TEXT_COLOR, PALETTES,
                       PRESENTER_AXIS_GAP_PX, PRESENTER_AXIS_TITLE_CHARS, PRESENTER_AXIS_TITLE_PX,
                       PRESENTER_FONT_PX, PRESENTER_LINE_FACTOR, PRESENTER_MAX_HEIGHT_PX,
                       PRESENTER_MIN_PLOT_PX, PRESENTER_MIN_ROWS_SHARE, PRESENTER_NOTE_CHARS,
                       PRESENTER_NOTE_CLEARANCE_PX, PRESENTER_SCREEN_FIGURE_PX,
                       PRESENTER_TEXT_COLOR, PRESENTER_TITLE_CHARS, PRESENTER_TITLE_PAD_PX,
                       PRESENTER_TITLE_PX, SAFE_PALETTE, STANDARD_PALETTE, UPRIGHT_LABEL_ANGLE,
                       every_nth, label_pitch, label_step, line_count, visible_text, wrapped)


def themed(figure: go.Figure, presenter: bool, palette: str = STANDARD_PALETTE) -> go.Figure:
    """A copy of `figure` in presenter style (large dark text) and/or the colour-blind-safe
    palette; the figure itself is returned when neither is asked for."""
    if palette not in PALETTES:
        raise ValueError(f"Unknown palette {palette!r}; choose one of {', '.join(PALETTES)}.")
    if not presenter and palette == STANDARD_PALETTE:
        return figure
    result = go.Figure(figure)
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
    result = go.Figure(figure)
    layout = result.layout
    layout.font.color = layout.font.color or FIGURE_TEXT_COLOR
    layout.legend.font.color = layout.legend.font.color or FIGURE_TEXT_COLOR
    layout.legend.title.font.color = layout.legend.title.font.color or FIGURE_TEXT_COLOR
    for axis in _axes(result):
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


def _axes(figure: go.Figure) -> list:
    layout = figure.layout
    return [layout[name] for name in layout if re.fullmatch(r"[xy]axis\d*", name)]


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


def _is_note(annotation) -> bool:
    """An explanatory note under the plot: placed on the paper at or below its bottom."""
    return (annotation.xref == "paper" and annotation.yref == "paper" and not annotation.showarrow
            and annotation.y is not None and annotation.y <= 0 and bool(annotation.text))


def _is_subplot_title(annotation) -> bool:
    return (annotation.yref == "paper" and annotation.xref == "paper"
            and annotation.y is not None and annotation.y > 0
            and annotation.yanchor == "bottom" and not annotation.showarrow)


def _axis_labels(figure: go.Figure, axis) -> list[str]:
    """The tick labels an x axis shows: its own, else the category names of its traces."""
    if axis.ticktext is not None:
        return [str(t) for t in axis.ticktext]
    name = axis.plotly_name.replace("axis", "")
    names = [str(value) for trace in figure.data if (trace.xaxis or "x") == name
             and "x" in trace and trace.x is not None for value in trace.x
             if isinstance(value, str)]
    return names or ["0000"]


def _tick_band_px(figure: go.Figure, axis) -> float:
    """Height an x axis's tick labels (upright or slanted, as long as the longest) and its
    title take beside the plot."""
    if axis.showticklabels is False:
        labels_px = 0.0
    else:
        font = axis.tickfont.size or PRESENTER_FONT_PX
        labels = _axis_labels(figure, axis)
        longest = max((len(visible_text(t)) for t in labels), default=1) * font * CHAR_WIDTH
        if isinstance(axis.tickangle, (int, float)):
            slant = abs(math.sin(math.radians(axis.tickangle)))
        else:  # Plotly's own angle: upright when _thin_ticks spaced them for that, else unknown
            slant = 0.0 if axis.tickmode == "array" and axis.ticktext is not None else 1.0
        labels_px = longest * slant + font * PRESENTER_LINE_FACTOR
    title = (axis.title.font.size or PRESENTER_AXIS_TITLE_PX) * PRESENTER_LINE_FACTOR \
        if axis.title.text else 0.0
    return labels_px + title + PRESENTER_AXIS_GAP_PX


def _top_axis_px(figure: go.Figure) -> float:
    """Height an x axis drawn above the plot takes."""
    return max((_tick_band_px(figure, axis) for axis in _axes(figure)
                if axis.plotly_name.startswith("x") and axis.side == "top"), default=0.0)


def _text_px(annotation) -> float:
    return line_count(annotation.text) * (annotation.font.size or PRESENTER_FONT_PX) \
        * PRESENTER_LINE_FACTOR


def _presenter_subplot_titles(figure: go.Figure) -> None:
    """Subplot titles above an x axis drawn on top: lifted over its labels and title."""
    top = _top_axis_px(figure)
    if not top:
        return
    for annotation in figure.layout.annotations:
        if _is_subplot_title(annotation) and annotation.y >= 1 - 1e-3:
            annotation.yshift = max(annotation.yshift or 0, top + PRESENTER_TITLE_PAD_PX)


def _presenter_row_gaps(figure: go.Figure) -> None:
    """Subplots stacked in rows: the gap under each row holds its x axis's labels and the next
    row's title (the rows share what is left in their old proportions)."""
    layout = figure.layout
    if layout.height is None:
        return
    rows: dict[tuple[float, float], list[str]] = {}
    for axis in _axes(figure):
        if axis.plotly_name.startswith("y") and axis.domain is not None:
            domain = (round(axis.domain[0], 6), round(axis.domain[1], 6))
            rows.setdefault(domain, []).append(axis.plotly_name.replace("axis", ""))
    if len(rows) < 2:
        return
    ordered = sorted(rows, key=lambda domain: -domain[1])  # top row first
    plot_px = layout.height - (layout.margin.t or 0) - (layout.margin.b or 0)
    if plot_px <= 0:
        return
    gaps = []
    for upper, lower in zip(ordered, ordered[1:]):
        below = max((_tick_band_px(figure, axis) for axis in _axes(figure)
                     if axis.plotly_name.startswith("x") and axis.anchor in rows[upper]
                     and axis.side != "top"), default=0.0)
        title = max((_text_px(a) for a in layout.annotations
                     if _is_subplot_title(a) and abs(a.y - lower[1]) < 1e-3), default=0.0)
        gaps.append(below + title + PRESENTER_TITLE_PAD_PX)
    room = sum(gaps) / (1 - PRESENTER_MIN_ROWS_SHARE)
    if room > plot_px:  # the rows would be squeezed flat: the figure grows instead
        layout.height += round(room - plot_px)
        plot_px = room
    gaps = [gap / plot_px for gap in gaps]
    sizes = [high - low for low, high in ordered]
    share = (1 - sum(gaps)) / sum(sizes)
    top = 1.0
    moved = {}
    for index, domain in enumerate(ordered):
        low = max(0.0, top - sizes[index] * share)
        moved[domain] = (low, top)
        top = low - (gaps[index] if index < len(gaps) else 0.0)
    for axis in _axes(figure):
        if axis.plotly_name.startswith("y") and axis.domain is not None:
            old = (round(axis.domain[0], 6), round(axis.domain[1], 6))
            axis.domain = moved[old]
            if axis.tickmode != "array":  # a short row: as many ticks as have room
                row_px = (axis.domain[1] - axis.domain[0]) * plot_px
                pitch = label_pitch(axis.tickfont.size or PRESENTER_FONT_PX) * 2
                axis.nticks = max(2, int(row_px // pitch))
    for annotation in layout.annotations:
        if _is_subplot_title(annotation):
            for old, new in moved.items():
                if abs(annotation.y - old[1]) < 1e-3:
                    annotation.y = new[1]
                    break


def _legend_above_px(figure: go.Figure) -> float:
    """Height a legend placed above the plot takes (one line per entry, at most)."""
    legend = figure.layout.legend
    if figure.layout.showlegend is False or legend.y is None or legend.y < 1:
        return 0.0
    entries = sum(1 for trace in figure.data if trace.showlegend is not False and trace.name)
    return entries * (legend.font.size or PRESENTER_FONT_PX) * PRESENTER_LINE_FACTOR


def _presenter_title(figure: go.Figure) -> None:
    """The title wrapped, at the top of the figure, with a top margin that holds it and, under
    it, subplot titles and an x axis drawn above the plot."""
    layout = figure.layout
    if not layout.title.text:
        return
    layout.title.text = wrapped(layout.title.text, _title_chars(layout))
    title = line_count(layout.title.text) * layout.title.font.size * PRESENTER_LINE_FACTOR
    above = max((_text_px(a) + (a.yshift or 0) for a in layout.annotations
                 if _is_subplot_title(a) and a.text and a.y >= 1 - 1e-3), default=0)
    # Plotly centres a title's extra lines on its anchor: half of them would rise above it
    first = layout.title.font.size * PRESENTER_LINE_FACTOR
    layout.title.update(yref="container", y=1, yanchor="top",
                        pad=dict(t=PRESENTER_TITLE_PAD_PX + (title - first) / 2))
    needed = PRESENTER_TITLE_PAD_PX * 2 + title + max(above, _top_axis_px(figure)) \
        + PRESENTER_AXIS_GAP_PX + _legend_above_px(figure)
    before = layout.margin.t or 0
    layout.margin.t = max(before, round(needed))
    if layout.height is not None:  # the larger title's room is added, not taken from the plot
        layout.height = min(layout.height + layout.margin.t - before,
                            max(layout.height, PRESENTER_MAX_HEIGHT_PX))


def _title_chars(layout) -> int:
    """Characters a presenter title's line holds: PRESENTER_TITLE_CHARS (a third of the screen),
    or more in a figure whose fixed width holds more (the wide all-heads mosaic)."""
    if layout.width is None:
        return PRESENTER_TITLE_CHARS
    room = layout.width - (layout.margin.l or 0) - (layout.margin.r or 0)
    return max(PRESENTER_TITLE_CHARS, int(room / (layout.title.font.size * CHAR_WIDTH)))


def _presenter_notes(figure: go.Figure) -> None:
    """Notes under the plot wrapped narrower, placed under the x axis's labels and title, with
    the bottom margin they need."""
    layout = figure.layout
    notes = [a for a in layout.annotations if _is_note(a)]
    if not notes:
        return
    height = 0.0
    for note in notes:
        note.text = wrapped(note.text, PRESENTER_NOTE_CHARS)
        note.update(y=0, yanchor="top", yshift=-PRESENTER_NOTE_CLEARANCE_PX)
        height = max(height, line_count(note.text) * note.font.size * PRESENTER_LINE_FACTOR)
    layout.margin.b = max(layout.margin.b or 0, PRESENTER_NOTE_CLEARANCE_PX + height
                          + PRESENTER_TITLE_PAD_PX)
    if layout.height is not None:  # the note's room comes from the plot, down to a minimum
        layout.height = min(max(layout.height, (layout.margin.t or 0) + layout.margin.b
                                + PRESENTER_MIN_PLOT_PX), PRESENTER_SCREEN_FIGURE_PX)


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
    for axis in _axes(figure):
        axis.tickfont.size = _at_least(axis.tickfont.size, PRESENTER_FONT_PX)
        axis.tickfont.color = dark
        axis.title.font.size = _at_least(axis.title.font.size, PRESENTER_AXIS_TITLE_PX)
        axis.title.font.color = dark
        if axis.plotly_name.startswith("y") and axis.title.text:  # along a short plot's side
            axis.title.text = wrapped(axis.title.text, PRESENTER_AXIS_TITLE_CHARS)
        axis.automargin = True
        _thin_ticks(figure, axis)
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
    _presenter_subplot_titles(figure)
    _presenter_title(figure)
    _presenter_notes(figure)
    _presenter_row_gaps(figure)


def _has_colorbar(figure: go.Figure) -> bool:
    return any(getattr(trace, "showscale", None) is not False and "colorscale" in trace
               and trace.type in ("heatmap", "contour") for trace in figure.data)


def _axis_length(figure: go.Figure, axis) -> float | None:
    """Pixels an axis spans when the figure fixes its size (else None). Square-celled maps
    (`scaleanchor`) take the shorter of the two sides."""
    layout = figure.layout
    margin = layout.margin
    if layout.height is None:
        return None
    height = layout.height - (margin.t or 0) - (margin.b or 0)
    width = None
    if layout.width is not None:
        width = layout.width - (margin.l or 0) - (margin.r or 0)
        width -= COLORBAR_ALLOWANCE_PX if _has_colorbar(figure) else 0
    anchored = any(a.scaleanchor is not None for a in _axes(figure))
    if axis.plotly_name.startswith("y"):
        total = height if width is None or not anchored else min(height, width)
    elif width is None:
        return height if anchored else None
    else:
        total = width if not anchored else min(height, width)
    low, high = axis.domain if axis.domain is not None else (0.0, 1.0)
    return max(0.0, total * (high - low))


def _thin_ticks(figure: go.Figure, axis) -> None:
    """Keep every n-th explicit tick label so that the larger font does not overlap."""
    if axis.tickmode != "array" or axis.ticktext is None or axis.tickvals is None:
        return
    length = _axis_length(figure, axis)
    if length is None:
        return
    vertical = axis.plotly_name.startswith("y")
    if vertical:
        pitch = label_pitch(axis.tickfont.size)
    elif axis.tickangle in (None, 0):
        longest = max((len(str(t)) for t in axis.ticktext), default=1)
        pitch = max(label_pitch(axis.tickfont.size), longest * axis.tickfont.size * CHAR_WIDTH)
    else:
        pitch = label_pitch(axis.tickfont.size, axis.tickangle)
        upright = label_pitch(axis.tickfont.size, UPRIGHT_LABEL_ANGLE)
        if label_step(len(axis.ticktext), length, pitch) > 1 and upright < pitch:
            axis.tickangle, pitch = UPRIGHT_LABEL_ANGLE, upright  # more labels fit upright
    step = label_step(len(axis.ticktext), length, pitch)
    if step > 1:
        kept = every_nth(len(axis.ticktext), step)
        axis.tickvals = [axis.tickvals[i] for i in kept]
        axis.ticktext = [axis.ticktext[i] for i in kept]
