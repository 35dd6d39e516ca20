"""Predictions next to attention: a language-model head's summaries (models/predictions.py) in,
a table or a Plotly figure out."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from models.predictions import Candidate, PerPosition
from viz import style
from viz.generation import candidates_figure, visible_text

LOSS_BAR_COLOR = "#3182bd"
SURPRISE_COLOR = "#d62728"  # the actual token was not among the model's top candidates
LOSS_PLOT_PX = 360


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
    for p in per_position.positions:
        rows.append({
            "position": p.position,
            "read": visible_text(tokens[p.position]),
            "came next": visible_text(p.actual.text),
            "probability": p.actual.probability,
            "loss (bits)": p.loss_bits,
            # one type per column (Arrow): "3", or "> 10" outside the candidates kept
            "rank": str(p.rank) if p.rank is not None else f"> {len(p.candidates)}",
            "model's first choice": visible_text(p.candidates[0].text),
        })
    return pd.DataFrame(rows)


def loss_figure(per_position: PerPosition) -> go.Figure:
    """Bits of surprise at each token that came (the per-token loss), one bar per position."""
    positions = per_position.positions
    labels = [f"#{p.position + 1} {visible_text(p.actual.text)}" for p in positions]
    colours = [LOSS_BAR_COLOR if p.rank is not None else SURPRISE_COLOR for p in positions]
    hover = [f"model's first choice: {visible_text(p.candidates[0].text)} "
             f"({p.candidates[0].probability:.3f})" for p in positions]
    figure = go.Figure(go.Bar(
        x=labels, y=[p.loss_bits for p in positions], marker_color=colours, customdata=hover,
        hovertemplate="%{x}<br>loss: %{y:.2f} bits<br>%{customdata}<extra></extra>",
    ))
    figure.update_layout(
        title=dict(text=f"Loss at each token (mean {per_position.mean_loss_bits:.2f} bits, "
                        f"perplexity {per_position.perplexity:.1f})"),
        font=style.FONT, margin=style.MARGIN, plot_bgcolor="white", height=LOSS_PLOT_PX,
        xaxis=dict(type="category", tickangle=-45), yaxis=dict(title="bits", gridcolor="#eeeeee"),
    )
    return figure
