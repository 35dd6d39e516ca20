"""Figures and tables of the causal interventions: patching grids, attribution patching beside
them, the logit lens and direct logit attribution.

Pure functions on arrays and labels (the engine's results, models/experiments/patching.py and
its neighbours, are read by the pages and handed over as arrays): a Plotly figure or a DataFrame
out. Grids reuse the one heatmap builder (viz.heatmap.matrix_heatmap); every cell shows its exact
values on hover.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from viz import style
from viz.head_analysis import layer_head_map
from viz.heatmap import fit_rows, matrix_heatmap
from viz.labels import display_tokens, numbered_labels, safe_token, tick_labels

BAR_PX = style.ROW_PX  # one bar of a horizontal bar chart: room for its label
BAR_AXIS_PX = 90  # under the bars: the tick labels and the axis title, at presenter size
BAR_MIN_PX = 260
SCATTER_PX = 420
DIAGONAL_COLOR = "#7f7f7f"
POSITIVE_COLOR = "#2166ac"  # the ends of the diverging scale: pushes the answer up
NEGATIVE_COLOR = "#b2182b"  # ... pushes it down
LENS_TEXT_PX = 10  # the top token written in each cell of the logit lens
DECIMALS = 4


def _limit(values: np.ndarray, at_least: float) -> float:
    finite = np.abs(values[np.isfinite(values)])
    return max(float(finite.max()) if finite.size else 0.0, at_least, style.MIN_COLOR_RANGE)


def _hover_labels(labels: Sequence[str], title: str) -> list[str]:
    """Escaped labels for a hover: "Mary #1" along positions (distinct when a token repeats)."""
    return numbered_labels(tuple(labels)) if title == "position" else tick_labels(tuple(labels))


def patching_map(values: np.ndarray, raw: np.ndarray, rows: Sequence[str],
                 columns: Sequence[str], title: str, axis_titles: tuple[str, str]) -> go.Figure:
    """A patching grid (R, C): normalised values coloured on a scale centred on 0 (1 = the
    clean run), the raw logit difference beside each on hover. `columns` are the prompt's
    tokens or head numbers, `axis_titles` (rows, columns) such as ("layer", "position")."""
    values = np.asarray(values, dtype=float)
    limit = _limit(values, 1.0)
    figure = matrix_heatmap(values, tuple(columns), title, zmin=-limit, zmax=limit,
                            colorbar_title="restored", row_tokens=tuple(rows),
                            axis_titles=axis_titles)
    row_labels = np.array(_hover_labels(rows, axis_titles[0]), dtype=object)
    column_labels = np.array(_hover_labels(columns, axis_titles[1]), dtype=object)
    raw_text = np.array([[f"{value:.{DECIMALS}f}" for value in row]
                         for row in np.asarray(raw, dtype=float)], dtype=object)
    labels = np.broadcast_arrays(row_labels[:, None], column_labels[None, :], raw_text)
    figure.update_traces(
        colorscale=style.DIVERGING_COLORSCALE, zmid=0.0, customdata=np.stack(labels, axis=-1),
        hovertemplate=(f"{axis_titles[0]}: %{{customdata[0]}}<br>{axis_titles[1]}: "
                       f"%{{customdata[1]}}<br>restored: %{{z:.{DECIMALS}f}}<br>logit "
                       "difference: %{customdata[2]}<extra></extra>"))
    return fit_rows(figure, len(rows))


def estimate_scatter(exact: np.ndarray, estimate: np.ndarray, labels: Sequence[str],
                     title: str) -> go.Figure:
    """Exact patching (x) against attribution patching (y), one dot per cell, with the line
    where they agree."""
    exact = np.asarray(exact, dtype=float).ravel()
    estimate = np.asarray(estimate, dtype=float).ravel()
    low = float(min(exact.min(), estimate.min(), 0.0))
    high = float(max(exact.max(), estimate.max(), 1.0))
    figure = go.Figure([
        go.Scatter(x=[low, high], y=[low, high], mode="lines", name="agree",
                   line=dict(color=DIAGONAL_COLOR, dash="dot"), hoverinfo="skip"),
        go.Scatter(x=exact, y=estimate, mode="markers", name="cells",
                   text=[safe_token(label) for label in labels],
                   marker=dict(color=style.MEASURED_COLOR, size=7, opacity=0.7),
                   hovertemplate=(f"%{{text}}<br>exact: %{{x:.{DECIMALS}f}}<br>estimate: "
                                  f"%{{y:.{DECIMALS}f}}<extra></extra>")),
    ])
    figure.update_layout(title=dict(text=title), font=style.FONT, height=SCATTER_PX,
                         margin=style.MARGIN, plot_bgcolor="white", showlegend=False,
                         xaxis=dict(title="exact patching", zeroline=True),
                         yaxis=dict(title="attribution patching", zeroline=True))
    return figure


def cell_labels(rows: Sequence[str], columns: Sequence[str],
                axis_titles: tuple[str, str]) -> list[str]:
    """A name for every cell of an (R, C) grid, row by row: "layer 3 · position Mary #9"."""
    row_labels = [display for display in display_tokens(list(rows))]
    column_labels = [f"{display} #{i}" if axis_titles[1] == "position" else display
                     for i, display in enumerate(display_tokens(list(columns)))]
    return [f"{axis_titles[0]} {row} · {axis_titles[1]} {column}"
            for row in row_labels for column in column_labels]


def disagreement_table(cells: Sequence[tuple[tuple[int, int], float, float]],
                       rows: Sequence[str], columns: Sequence[str],
                       axis_titles: tuple[str, str]) -> pd.DataFrame:
    """((row, column), exact, estimate) of the cells where the two disagree most, largest gap
    first, as a table naming each cell."""
    names = cell_labels(rows, columns, axis_titles)
    return pd.DataFrame({"cell": [names[row * len(columns) + column]
                                  for (row, column), _, _ in cells],
                         "exact": [exact for _, exact, _ in cells],
                         "estimate": [estimate for _, _, estimate in cells],
                         "gap": [estimate - exact for _, exact, estimate in cells]})


def tokens_side_by_side(clean: Sequence[str], corrupted: Sequence[str]) -> pd.DataFrame:
    """Two prompts' tokens by position (blank where one is shorter)."""
    count = max(len(clean), len(corrupted))
    shown_clean, shown_corrupted = display_tokens(list(clean)), display_tokens(list(corrupted))
    return pd.DataFrame({
        "position": list(range(count)),
        "clean": [shown_clean[i] if i < len(clean) else "" for i in range(count)],
        "corrupted": [shown_corrupted[i] if i < len(corrupted) else "" for i in range(count)]})


def grid_table(values: np.ndarray, rows: Sequence[str], columns: Sequence[str]) -> pd.DataFrame:
    """A grid as a table, one row per grid row (for reading exact numbers)."""
    return pd.DataFrame(np.asarray(values, dtype=float), index=list(rows),
                        columns=list(columns))


# --- the logit lens -------------------------------------------------------------------------

def lens_map(probabilities: np.ndarray, top_texts: Sequence[Sequence[Sequence[str]]],
             top_probabilities: np.ndarray, rows: Sequence[str], tokens: Sequence[str],
             title: str, colorbar_title: str) -> go.Figure:
    """Rows (layers) x positions: each cell coloured by a probability (R, T) and labelled with
    that row's top token there; the hover lists the row's top tokens (R, T, k) with their
    probabilities."""
    probabilities = np.asarray(probabilities, dtype=float)
    top_probabilities = np.asarray(top_probabilities, dtype=float)
    columns = numbered_labels(tuple(tokens))
    figure = matrix_heatmap(probabilities, tuple(tokens), title, zmin=0.0, zmax=1.0,
                            colorbar_title=colorbar_title, row_tokens=tuple(rows),
                            axis_titles=("layer", "position"))
    hover = [[[safe_token(row_label), column, _top_tokens_hover(texts, chances)]
              for column, texts, chances in zip(columns, row_texts, row_chances)]
             for row_label, row_texts, row_chances in zip(rows, top_texts, top_probabilities)]
    figure.update_traces(
        text=[[safe_token(texts[0]) for texts in row] for row in top_texts],
        texttemplate="%{text}", textfont=dict(size=LENS_TEXT_PX), customdata=hover,
        hovertemplate=(f"%{{customdata[0]}} · %{{customdata[1]}}<br>{colorbar_title}: "
                       f"%{{z:.{DECIMALS}f}}<br>top tokens:<br>%{{customdata[2]}}<extra></extra>"))
    return fit_rows(figure, len(rows))


def _top_tokens_hover(texts: Sequence[str], probabilities: Sequence[float]) -> str:
    """One cell's hover: its top tokens with their probabilities, one a line."""
    return "<br>".join(f"{safe_token(repr(text))} {probability:.3f}"
                       for text, probability in zip(texts, probabilities))


def rank_figure(ranks: np.ndarray, probabilities: np.ndarray, rows: Sequence[str],
                token: str) -> go.Figure:
    """The rank of one token by layer (1 = the layer's top prediction), on a log scale."""
    ranks = np.asarray(ranks, dtype=float)
    ticks = rank_ticks(int(ranks.max(initial=1)))
    figure = go.Figure(go.Scatter(
        x=list(rows), y=ranks, mode="lines+markers", marker=dict(color=style.MEASURED_COLOR),
        customdata=np.asarray(probabilities, dtype=float),
        hovertemplate=(f"%{{x}}<br>rank: %{{y:.0f}}<br>probability: "
                       f"%{{customdata:.{DECIMALS}f}}<extra></extra>")))
    figure.update_layout(
        title=dict(text=f"Rank of {safe_token(repr(token))} by layer"), font=style.FONT,
        height=style.LINE_PLOT_HEIGHT, margin=style.MARGIN, plot_bgcolor="white",
        xaxis=dict(title="layer", tickangle=style.KEY_LABEL_ANGLE),
        yaxis=dict(title="rank (1 = top)", type="log", autorange="reversed",
                   tickvals=ticks, ticktext=[f"{tick:,}" for tick in ticks]))
    return figure


def rank_ticks(largest: int) -> list[int]:
    """Ranks to label on a log axis from 1 to `largest`, the last one at or above it: 1, 2, 5,
    10, 20, ... over at most two decades, only the powers of ten beyond (Plotly's own log ticks
    label every digit of a short range, 6 to 9 overlapping at presenter size)."""
    steps = (1, 2, 5) if largest <= 100 else (1,)
    ticks, power = [], 1
    while not ticks or ticks[-1] < largest:
        ticks.extend(step * power for step in steps)
        power *= 10
    return ticks[:next(index for index, tick in enumerate(ticks) if tick >= largest) + 1]


def lens_table(top_texts: Sequence[Sequence[Sequence[str]]], top_probabilities: np.ndarray,
               rows: Sequence[str], tokens: Sequence[str]) -> pd.DataFrame:
    """Each row's top token at each position with its probability: "' Paris' 0.66"."""
    columns = [f"#{i} {token}" for i, token in enumerate(display_tokens(list(tokens)))]
    chances = np.asarray(top_probabilities, dtype=float)
    cells = [[f"{texts[0]!r} {cell[0]:.2f}" for texts, cell in zip(row_texts, row_chances)]
             for row_texts, row_chances in zip(top_texts, chances)]
    return pd.DataFrame(cells, index=list(rows), columns=columns)


# --- direct logit attribution ---------------------------------------------------------------

def shares_map(shares: np.ndarray, title: str) -> go.Figure:
    """Each head's direct share (L, H) on a scale centred on 0."""
    shares = np.asarray(shares, dtype=float)
    limit = _limit(shares, 0.0)
    return layer_head_map(shares, title, "share", zmin=-limit, zmax=limit, diverging=True)


def contribution_bars(parts: Sequence[tuple[str, float]], title: str) -> go.Figure:
    """Horizontal bars, the first part on top: blue pushes the answer up, red down."""
    labels = [label for label, _ in parts][::-1]
    values = [value for _, value in parts][::-1]
    figure = go.Figure(go.Bar(
        x=values, y=labels, orientation="h",
        marker_color=[POSITIVE_COLOR if value >= 0 else NEGATIVE_COLOR for value in values],
        hovertemplate=f"%{{y}}: %{{x:.{DECIMALS}f}}<extra></extra>"))
    figure.update_layout(
        title=dict(text=title), font=style.FONT, margin=style.MARGIN, plot_bgcolor="white",
        height=max(BAR_MIN_PX, style.MARGIN["t"] + BAR_PX * len(parts) + BAR_AXIS_PX),
        xaxis=dict(title="share of the logit difference", zeroline=True))
    return figure
