"""Predictions next to attention: a language-model head's summaries (models/experiments/predictions.py) in,
a table or a Plotly figure out."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from models.experiments.predictions import Candidate, PerPosition
from viz import style
from viz.generation import candidates_figure, visible_text
from viz.labels import display_tokens

LOSS_BAR_COLOR = "#3182bd"
SURPRISE_COLOR = "#d62728"  # the actual token was not among the model's top candidates
LOSS_PLOT_PX = 360
# Above this many positions (a long input read whole) a bar would be narrower than a pixel: the
# loss is drawn as a line over the positions, the surprises as dots. Every full trace has fewer.
MAX_LOSS_BARS = 512
# How the page writes one position's numbers, in its sentence and in its table (printf style):
# three significant figures keep a tiny probability readable, where three decimals write 0.000
PROBABILITY_FORMAT = "%.3g"
LOSS_FORMAT = "%.2f"
LEGEND_TOP_MARGIN_PX = 90  # the line's legend sits between the title and the plot


def candidate_bars(candidates: tuple[Candidate, ...], title: str,
                   chosen_id: int | None = None) -> go.Figure:
    """The top candidates as bars; the candidate with `chosen_id` (if listed) is dark."""
    ids = [c.token_id for c in candidates]
    chosen = ids.index(chosen_id) if chosen_id in ids else None
    return candidates_figure([c.text for c in candidates], [c.probability for c in candidates],
                             chosen, title)


def position_table(per_position: PerPosition, tokens: tuple[str, ...]) -> pd.DataFrame:
    """One row per position: the token read, the token that came, its probability and loss,
    its rank among the model's candidates, and the model's first choice."""
    rows = []
    words = display_tokens(tokens)
    for p in per_position.positions:
        rows.append({
            "position": p.position,
            "read": visible_text(words[p.position]),
            "came next": visible_text(p.actual.text),
            "probability": p.actual.probability,
            "loss (bits)": p.loss_bits,
            # one type per column (Arrow): "3", or "> 10" outside the candidates kept
            "rank": str(p.rank) if p.rank is not None else f"> {len(p.candidates)}",
            "model's first choice": visible_text(p.candidates[0].text),
        })
    return pd.DataFrame(rows)


def loss_figure(per_position: PerPosition) -> go.Figure:
    """Bits of surprise at each token that came (the per-token loss): one bar per position, or
    over more than MAX_LOSS_BARS positions a line with the surprises marked."""
    positions = per_position.positions
    if len(positions) > MAX_LOSS_BARS:
        figure = _loss_line(per_position)
    else:
        labels = [f"#{p.position + 1} {visible_text(p.actual.text)}" for p in positions]
        colours = [LOSS_BAR_COLOR if p.rank is not None else SURPRISE_COLOR for p in positions]
        figure = go.Figure(go.Bar(
            x=labels, y=[p.loss_bits for p in positions], marker_color=colours,
            customdata=_first_choices(per_position),
            hovertemplate="%{x}<br>loss: %{y:.2f} bits<br>%{customdata}<extra></extra>",
        ))
        figure.update_xaxes(type="category", tickangle=-45)
        figure.update_layout(margin=style.MARGIN)
    figure.update_layout(
        title=dict(text=f"Loss at each token (mean {per_position.mean_loss_bits:.2f} bits, "
                        f"perplexity {per_position.perplexity:.1f})"),
        font=style.FONT, plot_bgcolor="white", height=LOSS_PLOT_PX,
        yaxis=dict(title="bits", gridcolor="#eeeeee"),
    )
    return figure


def _loss_line(per_position: PerPosition) -> go.Figure:
    """The loss over the positions of a long input as a line (x: the position of the token that
    came), with a dot where that token was not among the model's candidates."""
    positions = per_position.positions
    hover = [f"#{p.position + 1} {visible_text(p.actual.text)}<br>{first}"
             for p, first in zip(positions, _first_choices(per_position))]
    surprises = [index for index, p in enumerate(positions) if p.rank is None]
    template = "loss: %{y:.2f} bits<br>%{customdata}<extra></extra>"
    figure = go.Figure(go.Scatter(
        x=[p.position + 1 for p in positions], y=[p.loss_bits for p in positions], mode="lines",
        line=dict(color=LOSS_BAR_COLOR, width=1), customdata=hover, hovertemplate=template,
        name="loss of the token that came",
    ))
    figure.add_trace(go.Scatter(
        x=[positions[i].position + 1 for i in surprises],
        y=[positions[i].loss_bits for i in surprises], mode="markers",
        marker=dict(color=SURPRISE_COLOR, size=4), customdata=[hover[i] for i in surprises],
        hovertemplate=template, name=f"not among its top {len(positions[0].candidates)}",
    ))
    figure.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1,
                                     xanchor="right"),
                         margin={**style.MARGIN, "t": LEGEND_TOP_MARGIN_PX})
    figure.update_xaxes(title="position of the token that came", gridcolor="#eeeeee")
    return figure


def _first_choices(per_position: PerPosition) -> list[str]:
    return [f"model's first choice: {visible_text(p.candidates[0].text)} "
            f"({p.candidates[0].probability:.3f})" for p in per_position.positions]
