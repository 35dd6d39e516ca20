"""Colours, sizes and fonts shared by every figure, and the presenter / colour-blind-safe theme."""

from __future__ import annotations

import math
import re

import plotly.graph_objects as go

COLORSCALE = "Blues"
FONT = dict(family="Inter, 'Segoe UI', Helvetica, Arial, sans-serif", size=15)
SMALL_FONT_SIZE = 11
CELL_PX = 56  # target pixels per token on a single heatmap
MIN_HEATMAP_PX = 560
MAX_HEATMAP_PX = 900
MARGIN = dict(l=10, r=10, t=50, b=10)
HEATMAP_MARGIN = dict(l=10, r=10, t=110, b=10)  # room for the key labels along the top
HOVER_DECIMALS = 3
GRID_COLUMNS = 4  # small multiples per row
GRID_CELL_PX = 210
MAX_TICK_LABELS = 64  # above this many tokens, tick labels are thinned
HEATMAP_EXTRA_WIDTH = 90  # a single heatmap is this much wider than tall (its colour bar)
KEY_LABEL_ANGLE = -45  # key labels along the top of a heatmap
UPRIGHT_LABEL_ANGLE = -90  # ... when more fit that way
MAX_HOVER_TOKENS_IN_GRID = 128  # above this, small multiples hover on positions only


def heatmap_size(num_tokens: int) -> int:
    return max(MIN_HEATMAP_PX, min(MAX_HEATMAP_PX, CELL_PX * num_tokens + 140))

# Masks, scaling and positions (the teaching pages)
MASKED_COLOR = "#a3a3a3"  # neutral grey: a masked cell is "not allowed", not a number
MIN_COLOR_RANGE = 1e-6  # a colour scale over equal values is widened by this much
SIDE_BY_SIDE_SPACING = 0.1
SIDE_BY_SIDE_TITLE_SHIFT = 70  # px: subplot titles above the rotated key labels
SIDE_BY_SIDE_TOP_MARGIN = 170
DIVERGING_COLORSCALE = "RdBu"  # values in [-1, 1] (sinusoids, cosine similarity)
MEASURED_COLOR = "#1f77b4"
APPROXIMATION_COLOR = "#ff7f0e"
UNSCALED_COLOR = "#d62728"
SCALED_COLOR = "#1f77b4"
LINE_PLOT_HEIGHT = 420
RATIO_PANEL_PX = 200  # the measured / approximation panel under the dot-product plot
NOTE_MARGIN_PX = 110  # room under a plot for its explanatory note
SIDE_BY_SIDE_PX = 720  # height of side-by-side maps (they share the page width)
TOP_AXIS_MARGIN_PX = 110  # a title above an x axis drawn at the top
STEP_COLOURS = ("#6baed6", "#3182bd", "#08519c")  # q.k, scaled, softmax
TILE_OUTLINE = "#c7c7c7"
SELECTED_OUTLINE = "#d62728"
OVERVIEW_TILE_PX = 88  # the largest tile of the all-heads mosaic
OVERVIEW_MIN_TILE_PX = 24
# The mosaic's column at a projector's 1280 px with the sidebar open: tiles are sized so the
# figure's height matches the width it is drawn at (no band of empty figure under the tiles).
OVERVIEW_WIDTH_PX = 640
OVERVIEW_EXTRA_WIDTH_PX = 160  # labels and colour bar beside the tiles

# Adaptive attention span
SPAN_CURVE_COLOR = "#08519c"  # m_z(x)
SPAN_RAMP_FILL = "rgba(107, 174, 214, 0.25)"  # the ramp z < x < z + R
SPAN_MARKER_COLOR = "#d62728"  # the point (z + R/2, 0.5) and the line at S
REMOVED_COLOR = "#fd8d3c"  # attention mass a span removed
EMPTIED_COLOR = "#a50f15"  # rows left with nothing
HEAD_COLORS = ("#08519c", "#3182bd", "#6baed6", "#fd8d3c", "#e6550d", "#a63603",
               "#31a354", "#74c476", "#756bb1", "#9e9ac8", "#636363", "#bdbdbd")
SPAN_RAMP_OPACITY = 0.35  # the ramp block on top of a learned span
SPAN_LABEL_COLOR = "#252525"  # z written on a learned-span bar

# Presenter mode and the colour-blind-safe palette (applied to any figure by `themed`)
PRESENTER_FONT_PX = 18  # tick labels, legends, hover labels, annotations
PRESENTER_AXIS_TITLE_PX = 20
PRESENTER_TITLE_PX = 24
PRESENTER_MAX_HEIGHT_PX = 570  # a figure this tall fits a 1280 x 720 screen under a heading
PRESENTER_TEXT_COLOR = "#111111"  # 18.9:1 on white (WCAG asks 7:1 for enhanced contrast)
PRESENTER_TITLE_CHARS = 30  # a title wraps after about this many characters (a third of 1280 px)
PRESENTER_AXIS_TITLE_CHARS = 24  # a y axis title wraps after about this many characters
PRESENTER_NOTE_CHARS = 44  # a note under a plot wraps after about this many characters
PRESENTER_LINE_FACTOR = 1.3  # a line of text takes this many font sizes of height
PRESENTER_TITLE_PAD_PX = 10  # between a title and what is under it
PRESENTER_NOTE_CLEARANCE_PX = 100
PRESENTER_SCREEN_FIGURE_PX = 640  # a figure with a note fits under the app's top bar at 720 px
PRESENTER_MIN_PLOT_PX = 240  # what a figure's notes and titles leave at least to its plot
PRESENTER_AXIS_GAP_PX = 16  # tick marks and the stand-off of labels and axis titles
PRESENTER_MIN_ROWS_SHARE = 0.4  # stacked subplots keep at least this share of the plot height
# Axis, legend and colour-bar text of every figure: Streamlit's own grey #555867, 7.4:1 on white
# (its Plotly theme's #808495 gives 3.7:1, under WCAG AA's 4.5:1 for text)
FIGURE_TEXT_COLOR = "#555867"
LABEL_LINE_FACTOR = 1.1  # a tick label needs this many font sizes of axis length
MIN_LABEL_SLANT = 0.5  # labels nearly along their x axis are treated as rotated by 30 degrees
CHAR_WIDTH = 0.6  # a character's mean width, in font sizes
COLORBAR_ALLOWANCE_PX = 90  # width a colour bar with its ticks takes from a figure
STANDARD_PALETTE = "standard"
SAFE_PALETTE = "colour-blind-safe"
PALETTES = (STANDARD_PALETTE, SAFE_PALETTE)
SAFE_SEQUENTIAL = "cividis"
SAFE_DIVERGING = "PuOr"  # ColorBrewer marks it colour-blind safe
# Okabe & Ito (2008), ordered so that the first colours stand out most on white
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
             "#000000")
GREY_CHROMA = 0.06  # a colour whose channels differ by less than this is a grey and kept


def label_pitch(font_px: float, angle_deg: float = 0.0) -> float:
    """Pixels along an axis that one tick label needs so that it does not touch the next: a
    line height across the axis (a y axis, or an x axis whose labels are rotated by angle_deg)."""
    slant = abs(math.sin(math.radians(angle_deg))) if angle_deg else 1.0
    return font_px * LABEL_LINE_FACTOR / max(slant, MIN_LABEL_SLANT)


def label_step(count: int, axis_px: float, pitch_px: float) -> int:
    """Label every n-th of `count` ticks, with n the smallest that leaves each label `pitch_px`
    of an axis `axis_px` long."""
    if count <= 0:
        return 1
    fitting = max(1, int(axis_px // pitch_px))
    return max(1, math.ceil(count / fitting))


def every_nth(count: int, step: int) -> list[int]:
    """Positions 0, n, 2n, ... below `count`, the last of them moved to the last position so
    the end of the text is labelled (its gap to the one before grows, never shrinks)."""
    positions = list(range(0, count, max(1, step)))
    if len(positions) > 1:
        positions[-1] = count - 1
    return positions


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
        _safe_colours(result)
    return result


def readable_text(figure: go.Figure) -> go.Figure:
    """A copy of `figure` whose axis, legend, colour-bar and annotation text without a colour of
    its own is FIGURE_TEXT_COLOR (WCAG AA contrast on white); colours already set (presenter
    mode's, a figure's own) stay, and so do titles (Streamlit draws them in its heading colour)
    and text written on cells and bars."""
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


def wrapped(text: str, width: int) -> str:
    """`text` with its lines broken at spaces into lines of at most about `width` characters
    (Plotly's line break is `<br>`; a word longer than `width` stays whole)."""
    lines = []
    for paragraph in re.split(r"<br\s*/?>", text):
        line = ""
        for word in paragraph.split(" "):
            if line and len(_visible(line)) + 1 + len(_visible(word)) > width:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        lines.append(line)
    return "<br>".join(lines)


def _visible(text: str) -> str:
    return re.sub(r"<[^>]+>", "", text)


def _line_count(text: str) -> int:
    return len(re.split(r"<br\s*/?>", text))


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
        longest = max((len(_visible(t)) for t in labels), default=1) * font * CHAR_WIDTH
        slant = abs(math.sin(math.radians(axis.tickangle))) if isinstance(
            axis.tickangle, (int, float)) else 1.0
        labels_px = longest * slant + font * PRESENTER_LINE_FACTOR
    title = (axis.title.font.size or PRESENTER_AXIS_TITLE_PX) * PRESENTER_LINE_FACTOR \
        if axis.title.text else 0.0
    return labels_px + title + PRESENTER_AXIS_GAP_PX


def _top_axis_px(figure: go.Figure) -> float:
    """Height an x axis drawn above the plot takes."""
    return max((_tick_band_px(figure, axis) for axis in _axes(figure)
                if axis.plotly_name.startswith("x") and axis.side == "top"), default=0.0)


def _text_px(annotation) -> float:
    return _line_count(annotation.text) * (annotation.font.size or PRESENTER_FONT_PX) \
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
    layout.title.text = wrapped(layout.title.text, PRESENTER_TITLE_CHARS)
    title = _line_count(layout.title.text) * layout.title.font.size * PRESENTER_LINE_FACTOR
    above = max((_text_px(a) + (a.yshift or 0) for a in layout.annotations
                 if _is_subplot_title(a) and a.text and a.y >= 1 - 1e-3), default=0)
    # Plotly centres a title's extra lines on its anchor: half of them would rise above it
    first = layout.title.font.size * PRESENTER_LINE_FACTOR
    layout.title.update(yref="container", y=1, yanchor="top",
                        pad=dict(t=PRESENTER_TITLE_PAD_PX + (title - first) / 2))
    needed = PRESENTER_TITLE_PAD_PX * 2 + title + max(above, _top_axis_px(figure)) \
        + PRESENTER_AXIS_GAP_PX + _legend_above_px(figure)
    layout.margin.t = max(layout.margin.t or 0, round(needed))


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
        height = max(height, _line_count(note.text) * note.font.size * PRESENTER_LINE_FACTOR)
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
        if annotation.font.color is None or _contrast_on_white(annotation.font.color) < 7:
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


# --- colours ------------------------------------------------------------------------------------

def relative_luminance(colour: str) -> float:
    """WCAG 2 relative luminance of a CSS colour (#rgb, #rrggbb, rgb(), rgba())."""
    channels = [value / 255 for value in _rgb(colour)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast_ratio(first: str, second: str) -> float:
    """WCAG 2 contrast ratio (1 to 21) between two colours."""
    lighter, darker = sorted((relative_luminance(first), relative_luminance(second)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def _contrast_on_white(colour: str) -> float:
    try:
        return contrast_ratio(colour, "#ffffff")
    except ValueError:
        return 1.0


def _rgb(colour: str) -> tuple[float, float, float]:
    return _rgba(colour)[:3]


def _rgba(colour: str) -> tuple[float, float, float, float]:
    text = str(colour).strip().lower()
    if text.startswith("#") and len(text) in (4, 7):
        digits = text[1:]
        if len(digits) == 3:
            digits = "".join(c * 2 for c in digits)
        return (int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16), 1.0)
    match = re.fullmatch(r"rgba?\(([^)]*)\)", text)
    if match:
        parts = [float(p) for p in match.group(1).split(",")]
        if len(parts) in (3, 4):
            return (parts[0], parts[1], parts[2], parts[3] if len(parts) == 4 else 1.0)
    named = {"white": (255, 255, 255), "black": (0, 0, 0), "grey": (128, 128, 128),
             "gray": (128, 128, 128)}
    if text in named:
        return (*named[text], 1.0)
    raise ValueError(f"Not a colour this module reads: {colour!r}")


def _is_grey(colour: str) -> bool:
    red, green, blue = _rgb(colour)
    return (max(red, green, blue) - min(red, green, blue)) / 255 < GREY_CHROMA


def _scale_colours(scale) -> list[str]:
    return [entry[1] for entry in scale]


def _safe_scale(scale):
    """The colour-blind-safe counterpart of a colour scale (same light-to-dark direction), or
    the scale itself when it is made of greys."""
    if scale is None:
        return None
    try:
        colours = _scale_colours(scale)
        if all(_is_grey(c) for c in colours):
            return scale
        lightness = [relative_luminance(c) for c in colours]
    except (ValueError, TypeError, IndexError):
        return scale
    ends = (lightness[0], lightness[-1])
    if max(lightness[1:-1], default=-1.0) > max(ends) + 0.05:  # light middle: diverging
        return SAFE_DIVERGING
    return SAFE_SEQUENTIAL if lightness[0] < lightness[-1] else SAFE_SEQUENTIAL + "_r"


class _Categorical:
    """Maps each distinct non-grey colour of a figure, in order of first use, to Okabe-Ito."""

    def __init__(self) -> None:
        self.assigned: dict[tuple[float, float, float], str] = {}

    def __call__(self, colour):
        if colour is None or not isinstance(colour, str):
            return colour
        try:
            red, green, blue, alpha = _rgba(colour)
        except ValueError:
            return colour
        if _is_grey(colour):
            return colour
        key = (red, green, blue)
        if key not in self.assigned:
            self.assigned[key] = OKABE_ITO[len(self.assigned) % len(OKABE_ITO)]
        new = self.assigned[key]
        if alpha >= 1.0:
            return new
        r, g, b = _rgb(new)
        return f"rgba({r:g}, {g:g}, {b:g}, {alpha:g})"

    def many(self, colours):
        if isinstance(colours, str) or colours is None:
            return self(colours)
        values = list(colours)
        if not all(isinstance(c, str) for c in values):
            return colours  # numbers on a colour scale
        return [self(c) for c in values]


def _safe_colours(figure: go.Figure) -> None:
    layout = figure.layout
    layout.colorway = OKABE_ITO
    for name in layout:
        if re.fullmatch(r"coloraxis\d*", name) and layout[name].colorscale is not None:
            layout[name].colorscale = _safe_scale(layout[name].colorscale)
    recolour = _Categorical()
    for trace in figure.data:
        if "colorscale" in trace and trace.colorscale is not None:
            trace.colorscale = _safe_scale(trace.colorscale)
        if "marker" in trace:
            marker = trace.marker
            if "colorscale" in marker and marker.colorscale is not None:
                marker.colorscale = _safe_scale(marker.colorscale)
            if "color" in marker and marker.color is not None:
                marker.color = recolour.many(marker.color)
            if "line" in marker and marker.line.color is not None:
                marker.line.color = recolour.many(marker.line.color)
        if "line" in trace and trace.line.color is not None:
            trace.line.color = recolour(trace.line.color)
        if "fillcolor" in trace and trace.fillcolor is not None:
            trace.fillcolor = recolour(trace.fillcolor)
    for shape in layout.shapes:
        shape.line.color = recolour(shape.line.color)
        shape.fillcolor = recolour(shape.fillcolor)
