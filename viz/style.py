"""Colours, sizes and fonts shared by every figure."""

COLORSCALE = "Blues"
FONT = dict(family="Inter, 'Segoe UI', Helvetica, Arial, sans-serif", size=15)
SMALL_FONT_SIZE = 11
CELL_PX = 56  # target pixels per token on a single heatmap
MIN_HEATMAP_PX = 560
MAX_HEATMAP_PX = 900
MARGIN = dict(l=10, r=10, t=50, b=10)
HOVER_DECIMALS = 3
GRID_COLUMNS = 4  # small multiples per row
GRID_CELL_PX = 210
MAX_TICK_LABELS = 64  # above this many tokens, tick labels are thinned
MAX_HOVER_TOKENS_IN_GRID = 128  # above this, small multiples hover on positions only


def heatmap_size(num_tokens: int) -> int:
    return max(MIN_HEATMAP_PX, min(MAX_HEATMAP_PX, CELL_PX * num_tokens + 140))
