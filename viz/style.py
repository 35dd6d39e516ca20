"""Colours, sizes and fonts shared by every figure."""

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
OVERVIEW_TILE_PX = 88

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
