"""Where presenter mode's larger text goes and the room it takes (viz/theme.py makes the text
large and dark, then calls these): a title wrapped to its figure's width with a top margin that
holds it and any labels drawn above the plot, notes under the plot with the bottom margin they
need, stacked rows spaced for their labels, and tick labels thinned so they do not overlap. A
fixed-height figure grows by the room its larger text takes rather than shrinking its plot, up to
what a projected screen holds."""

from __future__ import annotations

import math
import re

import plotly.graph_objects as go

from viz.style import (ACROSS_PAGE_PX, CHAR_WIDTH, COLORBAR_ALLOWANCE_PX, PRESENTER_AXIS_GAP_PX,
                       PRESENTER_AXIS_TITLE_PX, PRESENTER_FONT_PX, PRESENTER_LINE_FACTOR,
                       PRESENTER_MAX_HEIGHT_PX, PRESENTER_MIN_PLOT_PX, PRESENTER_MIN_ROWS_SHARE,
                       PRESENTER_NOTE_CHARS, PRESENTER_NOTE_CLEARANCE_PX,
                       PRESENTER_SCREEN_FIGURE_PX, PRESENTER_SUBPLOT_TITLE_CHARS,
                       PRESENTER_TITLE_CHARS, PRESENTER_TITLE_PAD_PX,
                       UPRIGHT_LABEL_ANGLE, every_nth, label_pitch, label_step, line_count,
                       visible_text, wrapped)


def axes(figure: go.Figure) -> list:
    layout = figure.layout
    return [layout[name] for name in layout if re.fullmatch(r"[xy]axis\d*", name)]


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


def tick_band_px(figure: go.Figure, axis) -> float:
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
        else:  # Plotly's own angle: upright when thin_ticks spaced them for that, else unknown
            slant = 0.0 if axis.tickmode == "array" and axis.ticktext is not None else 1.0
        labels_px = longest * slant + font * PRESENTER_LINE_FACTOR
    title = (axis.title.font.size or PRESENTER_AXIS_TITLE_PX) * PRESENTER_LINE_FACTOR \
        if axis.title.text else 0.0
    return labels_px + title + PRESENTER_AXIS_GAP_PX


def _top_axis_px(figure: go.Figure) -> float:
    """Height an x axis drawn above the plot takes."""
    return max((tick_band_px(figure, axis) for axis in axes(figure)
                if axis.plotly_name.startswith("x") and axis.side == "top"), default=0.0)


def _text_px(annotation) -> float:
    return line_count(annotation.text) * (annotation.font.size or PRESENTER_FONT_PX) \
        * PRESENTER_LINE_FACTOR


def place_subplot_titles(figure: go.Figure) -> None:
    """Subplot titles wrapped to the narrowest column a figure is drawn in; above an x axis
    drawn on top, lifted over its labels and title."""
    for annotation in figure.layout.annotations:
        if _is_subplot_title(annotation) and annotation.text:
            annotation.text = wrapped(annotation.text, PRESENTER_SUBPLOT_TITLE_CHARS)
    top = _top_axis_px(figure)
    if not top:
        return
    for annotation in figure.layout.annotations:
        if _is_subplot_title(annotation) and annotation.y >= 1 - 1e-3:
            annotation.yshift = max(annotation.yshift or 0, top + PRESENTER_TITLE_PAD_PX)


def space_rows(figure: go.Figure) -> None:
    """Subplots stacked in rows: the gap under each row holds its x axis's labels and the next
    row's title (the rows share what is left in their old proportions)."""
    layout = figure.layout
    if layout.height is None:
        return
    rows: dict[tuple[float, float], list[str]] = {}
    for axis in axes(figure):
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
        below = max((tick_band_px(figure, axis) for axis in axes(figure)
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
    for axis in axes(figure):
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


def place_title(figure: go.Figure) -> None:
    """The title wrapped, at the top of the figure, with a top margin that holds it and, under
    it, subplot titles and an x axis drawn above the plot (without a title, the margin holds
    the top row's subplot titles)."""
    layout = figure.layout
    above = max((_text_px(a) + (a.yshift or 0) for a in layout.annotations
                 if _is_subplot_title(a) and a.text and a.y >= 1 - 1e-3), default=0)
    if not layout.title.text:
        if above:
            _hold_on_top(layout, PRESENTER_TITLE_PAD_PX + above)
        return
    layout.title.text = wrapped(layout.title.text, _title_chars(layout))
    title = line_count(layout.title.text) * layout.title.font.size * PRESENTER_LINE_FACTOR
    # Plotly centres a title's extra lines on its anchor: half of them would rise above it
    first = layout.title.font.size * PRESENTER_LINE_FACTOR
    layout.title.update(yref="container", y=1, yanchor="top",
                        pad=dict(t=PRESENTER_TITLE_PAD_PX + (title - first) / 2))
    _hold_on_top(layout, PRESENTER_TITLE_PAD_PX * 2 + title + max(above, _top_axis_px(figure))
                 + PRESENTER_AXIS_GAP_PX + _legend_above_px(figure))


def _hold_on_top(layout, needed: float) -> None:
    """A top margin of at least `needed` px, its extra room added to a fixed height (up to the
    screen's), not taken from the plot."""
    before = layout.margin.t or 0
    layout.margin.t = max(before, round(needed))
    if layout.height is not None:
        layout.height = min(layout.height + layout.margin.t - before,
                            max(layout.height, PRESENTER_MAX_HEIGHT_PX))


def _title_chars(layout) -> int:
    """Characters a presenter title's line holds: PRESENTER_TITLE_CHARS (a third of the screen),
    or more in a figure whose fixed width spans the page (the long input's all-heads mosaic). A
    narrower fixed width is only nominal: Streamlit stretches a figure to its column, which is
    391 px for half of a page beside an open sidebar, so its title keeps the third's width."""
    if layout.width is None or layout.width < ACROSS_PAGE_PX:
        return PRESENTER_TITLE_CHARS
    room = layout.width - (layout.margin.l or 0) - (layout.margin.r or 0)
    return max(PRESENTER_TITLE_CHARS, int(room / (layout.title.font.size * CHAR_WIDTH)))


def place_notes(figure: go.Figure) -> None:
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
    anchored = any(a.scaleanchor is not None for a in axes(figure))
    if axis.plotly_name.startswith("y"):
        total = height if width is None or not anchored else min(height, width)
    elif width is None:
        return height if anchored else None
    else:
        total = width if not anchored else min(height, width)
    low, high = axis.domain if axis.domain is not None else (0.0, 1.0)
    return max(0.0, total * (high - low))


def thin_ticks(figure: go.Figure, axis) -> None:
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
