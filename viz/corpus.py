"""A corpus analysis drawn: a layer x head map of one measure's corpus mean (its spread on hover),
the heads laid out by how alike they attend, and one head's queries and keys in a plane (WebGL,
so 100,000 points stay responsive). Tables and arrays in, Plotly figures out; the measures and
layouts are computed by models.corpus.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from viz.style import COLORSCALE, FONT, MARGIN

MAP_PX = 460  # a 12-layer map beside the page's introduction fits a 720-pixel screen
MAP_ROW_PX = 16  # ... and a deeper model's map grows by this per layer beyond
MAP_FRAME_PX = 140  # title, axis titles and margins
LAYOUT_PX = 560
POINTS_PX = 640
MARKER_PX = 9
POINT_PX = 4
POINT_OPACITY = 0.55
QUERY_COLOUR, KEY_COLOUR = "#1f77b4", "#d62728"
OTHER_COLOUR = "#bdbdbd"
TOKEN_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                 "#17becf", "#bcbd22", "#7f7f7f")  # the most frequent tokens; the rest grey
LAYER_SCALE = "Viridis"
BY_KIND, BY_TOKEN, BY_POSITION = "query / key", "token", "position"
POINT_COLOURINGS = (BY_KIND, BY_TOKEN, BY_POSITION)
BY_LAYER, BY_LABEL = "layer", "label"
HEAD_COLOURINGS = (BY_LAYER, BY_LABEL)


def measure_map(heads: pd.DataFrame, measure: str) -> go.Figure:
    """Layer x head map of `<measure>_mean`; hover: mean, standard deviation, passages."""
    mean = heads.pivot(index="layer", columns="head", values=f"{measure}_mean")  # (L, H)
    spread = heads.pivot(index="layer", columns="head", values=f"{measure}_std")
    counts = heads.pivot(index="layer", columns="head", values=f"{measure}_passages")
    custom = np.stack([spread.to_numpy(dtype=float), counts.to_numpy(dtype=float)], axis=-1)
    figure = go.Figure(go.Heatmap(
        z=mean.to_numpy(dtype=float), x=[str(h) for h in mean.columns],
        y=[str(layer) for layer in mean.index], customdata=custom, colorscale=COLORSCALE,
        colorbar=dict(title=dict(text="mean")),
        hovertemplate=(f"layer %{{y}}, head %{{x}}<br>{measure}: mean %{{z:.3f}}"
                       "<br>std %{customdata[0]:.3f} over %{customdata[1]:.0f} passages"
                       "<extra></extra>")))
    height = max(MAP_PX, MAP_FRAME_PX + MAP_ROW_PX * len(mean.index))
    figure.update_layout(title=f"{measure}: corpus mean per head", height=height, font=FONT,
                         margin=MARGIN, xaxis_title="head", yaxis_title="layer",
                         yaxis_autorange="reversed")
    return figure


def heads_layout_figure(positions: np.ndarray, heads: pd.DataFrame,
                        colour_by: str = BY_LAYER) -> go.Figure:
    """The heads at `positions` (N, 2) (rows of `heads` in the same, layer-major, order),
    coloured by layer or by label; hover names each head."""
    if len(positions) != len(heads):
        raise ValueError(f"{len(positions)} positions for {len(heads)} heads")
    names = [f"layer {layer}, head {head}: {label}" for layer, head, label in
             zip(heads["layer"], heads["head"], heads["label"])]
    figure = go.Figure()
    if colour_by == BY_LAYER:
        figure.add_trace(go.Scatter(
            x=positions[:, 0], y=positions[:, 1], mode="markers", text=names,
            marker=dict(size=MARKER_PX, color=heads["layer"], colorscale=LAYER_SCALE,
                        showscale=True, colorbar=dict(title=dict(text="layer"))),
            hovertemplate="%{text}<extra></extra>", name="heads"))
    elif colour_by == BY_LABEL:
        for index, label in enumerate(sorted(set(heads["label"]))):
            chosen = (heads["label"] == label).to_numpy()
            figure.add_trace(go.Scatter(
                x=positions[chosen, 0], y=positions[chosen, 1], mode="markers", name=label,
                text=[name for name, kept in zip(names, chosen) if kept],
                marker=dict(size=MARKER_PX, color=TOKEN_COLOURS[index % len(TOKEN_COLOURS)]),
                hovertemplate="%{text}<extra></extra>"))
    else:
        raise ValueError(f"colour the heads by one of {HEAD_COLOURINGS}")
    # one line in the page's two-thirds column at presenter size; the caption beside it says
    # what "alike" is (the Jensen–Shannon distance) and how they are placed (MDS)
    figure.update_layout(title="Heads placed by likeness (MDS)",
                         height=LAYOUT_PX, font=FONT, margin=MARGIN,
                         xaxis=dict(showticklabels=False, title=""),
                         yaxis=dict(showticklabels=False, title="", scaleanchor="x"))
    return figure


def points_figure(plane: np.ndarray, tokens, passages, positions, layer: int, head: int,
                  colour_by: str = BY_KIND) -> go.Figure:
    """One head's S queries then S keys at `plane` (2S, 2), drawn with WebGL (go.Scattergl);
    `tokens`, `passages`, `positions` (S,) say where each sampled token is."""
    count = len(tokens)
    if plane.shape != (2 * count, 2):
        raise ValueError(f"a plane of {plane.shape} for {count} queries and {count} keys")
    tokens = np.asarray(tokens, dtype=object)
    hover = np.concatenate([
        [f"query '{t}' · passage {p}, position {q}" for t, p, q in zip(tokens, passages,
                                                                         positions)],
        [f"key '{t}' · passage {p}, position {q}" for t, p, q in zip(tokens, passages,
                                                                       positions)]])
    figure = go.Figure()
    if colour_by == BY_KIND:
        for name, part, colour in (("queries", slice(0, count), QUERY_COLOUR),
                                   ("keys", slice(count, 2 * count), KEY_COLOUR)):
            figure.add_trace(_points(plane[part], hover[part], name, colour))
    elif colour_by == BY_TOKEN:
        both = np.concatenate([tokens, tokens])
        common = [token for token, _ in Counter(tokens.tolist()).most_common(len(TOKEN_COLOURS))]
        rest = ~np.isin(both, common)
        figure.add_trace(_points(plane[rest], hover[rest], "other tokens", OTHER_COLOUR))
        for token, colour in zip(common, TOKEN_COLOURS):
            chosen = both == token
            figure.add_trace(_points(plane[chosen], hover[chosen], f"'{token}'", colour))
    elif colour_by == BY_POSITION:
        where = np.concatenate([positions, positions]).astype(float)
        trace = _points(plane, hover, "position", None)
        trace.marker.update(color=where, colorscale=LAYER_SCALE, showscale=True,
                            colorbar=dict(title=dict(text="position")))
        figure.add_trace(trace)
    else:
        raise ValueError(f"colour the points by one of {POINT_COLOURINGS}")
    # one line at presenter size: the legend says queries and keys, the caption how many
    figure.update_layout(title=f"Layer {layer} · head {head}: {count:,} tokens",
                         height=POINTS_PX, font=FONT, margin=MARGIN,
                         xaxis=dict(showticklabels=False, title=""),
                         yaxis=dict(showticklabels=False, title="", scaleanchor="x"),
                         legend=dict(itemsizing="constant"))
    return figure


def _points(plane: np.ndarray, hover: np.ndarray, name: str, colour: str | None) -> go.Scattergl:
    marker = dict(size=POINT_PX, opacity=POINT_OPACITY)
    if colour is not None:
        marker["color"] = colour
    return go.Scattergl(x=plane[:, 0], y=plane[:, 1], mode="markers", name=name,
                        text=hover, hovertemplate="%{text}<extra></extra>", marker=marker)
