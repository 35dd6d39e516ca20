"""A figure is themed for the sidebar's settings once per server: a view seen before (a warmed
deck's slide) is drawn from the kept copy, which is what theming it afresh gives."""

from __future__ import annotations

import uuid

import numpy as np
import plotly.graph_objects as go
import plotly.io

from models.store import stores
from ui.charts import Presentation, Shown, shown_figure
from viz import style
from viz.theme import readable_text, themed


def _figure(title: str, scale: float = 1.0) -> go.Figure:
    z = np.arange(12, dtype=float).reshape(3, 4) * scale
    figure = go.Figure(go.Heatmap(z=z, x=list("abcd"), y=list("xyz"), colorscale="Viridis"))
    figure.update_layout(title=dict(text=title), xaxis=dict(title=dict(text="key")))
    figure.add_annotation(text="a note", x=1, y=1, showarrow=False)
    return figure


def _json(figure: go.Figure) -> str:
    return plotly.io.to_json(figure, validate=False)


def test_a_figure_is_themed_once_and_the_kept_copy_is_a_fresh_theming():
    title = f"shown {uuid.uuid4()}"  # a figure no other test has drawn
    presenter = Presentation(presenter=True, palette=style.SAFE_PALETTE, figure_format="PNG")
    plain = Presentation(presenter=False, palette=style.STANDARD_PALETTE, figure_format="SVG")

    first = shown_figure(_figure(title), presenter)
    assert _json(first) == _json(readable_text(themed(_figure(title), True, style.SAFE_PALETTE)))
    assert first.layout.title.font.size >= style.PRESENTER_TITLE_PX
    assert shown_figure(_figure(title), presenter) is first  # the same figure, built again

    other = shown_figure(_figure(title), plain)
    assert other is not first
    assert _json(other) == _json(readable_text(themed(_figure(title), False,
                                                      style.STANDARD_PALETTE)))
    changed = shown_figure(_figure(title, scale=2.0), presenter)
    assert changed is not first and changed.data[0].z[0][1] == 2.0

    kept = [value for _, value in stores.FIGURES.items()
            if isinstance(value, Shown) and value.figure is first]
    assert len(kept) == 1 and kept[0].nbytes == len(_json(_figure(title)))
