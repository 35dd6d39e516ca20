"""Colours, sizes and fonts shared by every figure, and how tick labels are thinned to fit.

The presenter and colour-blind-safe themes are viz.theme; colour arithmetic is viz.palettes."""

from __future__ import annotations

import math
import re


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


def top_title(text: str) -> dict:
    """A title at the very top of its figure, above labels drawn along the top: anchored by its
    top a few px under the figure's edge (a title anchored at 0.995 of the figure rose 2 px past
    it)."""
    return dict(text=text, yref="container", y=1, yanchor="top", pad=dict(t=6))


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
OVERVIEW_WIDE_WIDTH_PX = 1100  # a mosaic with layers across: the page's width at 1280 px
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
# a subplot title wraps after about this many characters (half of a page beside an open sidebar,
# 391 px, holds 44 at 18 px)
PRESENTER_SUBPLOT_TITLE_CHARS = 44
ACROSS_PAGE_PX = 1000  # a figure this wide is drawn across the page, not in one of its columns
PRESENTER_AXIS_TITLE_CHARS = 24  # a y axis title wraps after about this many characters
PRESENTER_NOTE_CHARS = 44  # a note under a plot wraps after about this many characters
PRESENTER_LINE_FACTOR = 1.3  # a line of text takes this many font sizes of height
PRESENTER_TITLE_PAD_PX = 10  # between a title and what is under it
PRESENTER_NOTE_CLEARANCE_PX = 100
PRESENTER_SCREEN_FIGURE_PX = 580  # a figure with a note fits beside a page heading (at y = 135)
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


# Maps whose cells need not be square (layer x head scores, patching grids): one row has room
# for its label at presenter mode's size, which would otherwise overlap the next; the map is as
# wide as the page gives and grows in height with its rows up to what a 1280 x 720 screen shows
# under a heading.
ROW_PX = math.ceil(label_pitch(PRESENTER_FONT_PX)) + 4
ROWS_MIN_PX = 300
ROWS_MAX_PX = 560
# room for the title, the column axis's title and its slanted labels along the top, at
# presenter size (at 110 px a grid of 9 heads had 14 px a row and its labels overlapped)
ROWS_TOP_PX = 200


def every_nth(count: int, step: int) -> list[int]:
    """Positions 0, n, 2n, ... below `count`, the last of them moved to the last position so
    the end of the text is labelled (its gap to the one before grows, never shrinks)."""
    positions = list(range(0, count, max(1, step)))
    if len(positions) > 1:
        positions[-1] = count - 1
    return positions


def wrapped(text: str, width: int) -> str:
    """`text` with its lines broken at spaces into lines of at most about `width` characters
    (Plotly's line break is `<br>`); a word longer than `width` breaks after its slashes (a
    model's id, "owner/name"), and otherwise stays whole."""
    lines = []
    for paragraph in re.split(r"<br\s*/?>", text):
        line = ""
        for word in paragraph.split(" "):
            for index, part in enumerate(_long_word_parts(word, width)):
                glue = "" if index else " "  # the pieces of one word join without a space
                if line and len(visible_text(line)) + len(glue) + len(visible_text(part)) > width:
                    lines.append(line)
                    line = part
                else:
                    line = f"{line}{glue}{part}" if line else part
        lines.append(line)
    return "<br>".join(lines)


def _long_word_parts(word: str, width: int) -> list[str]:
    """A word longer than `width` as its pieces up to and including each slash."""
    if len(visible_text(word)) <= width or "/" not in word:
        return [word]
    return [part for part in re.split(r"(?<=/)", word) if part]


def visible_text(text: str) -> str:
    return re.sub(r"<[^>]+>", "", text)


def line_count(text: str) -> int:
    return len(re.split(r"<br\s*/?>", text))
