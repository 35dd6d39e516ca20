"""Figures of the masked LM pretrained here: its loss curve and BERT's recipe on one passage.

Inputs are plain arrays and tuples (the losses after each step; a passage's tokens and what the
recipe did to each), read from models/experiments/masked_lm.py's results by the page.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from viz import style
from viz.labels import display_tokens

SMOOTHING_STEPS = 20  # the curve's running mean, over this many steps
RAW_COLOUR = "#c6dbef"
SMOOTH_COLOUR = "#08519c"
UNIFORM_COLOUR = "#636363"
FATE_LABELS = {"masked": "yes: replaced by [MASK]", "random": "yes: replaced by a random token",
               "kept": "yes: kept as it was", "not chosen": "no"}


def running_mean(values: np.ndarray, window: int) -> np.ndarray:
    """The mean of the last `window` values at each step (fewer at the start)."""
    sums = np.cumsum(np.insert(np.asarray(values, dtype=float), 0, 0.0))
    steps = np.arange(1, len(values) + 1)
    start = np.maximum(steps - window, 0)
    return (sums[steps] - sums[start]) / (steps - start)


def pretraining_loss_figure(losses: tuple[float, ...] | np.ndarray, vocab_size: int) -> go.Figure:
    """The masked-LM loss after each step, its running mean, and the loss of a uniform guess."""
    values = np.asarray(losses, dtype=float)
    steps = np.arange(1, len(values) + 1)
    figure = go.Figure([
        go.Scatter(x=steps, y=values, mode="lines", name="loss of the step's batch",
                   line=dict(color=RAW_COLOUR)),
        go.Scatter(x=steps, y=running_mean(values, SMOOTHING_STEPS), mode="lines",
                   name=f"mean of the last {SMOOTHING_STEPS} steps",
                   line=dict(color=SMOOTH_COLOUR, width=3)),
        go.Scatter(x=[steps[0], steps[-1]], y=[math.log(vocab_size)] * 2, mode="lines",
                   name=f"a uniform guess over {vocab_size:,} tokens (ln V)",
                   line=dict(color=UNIFORM_COLOUR, dash="dot")),
    ])
    figure.update_layout(
        title=dict(text="Masked-word loss while pretraining (cross-entropy at the chosen "
                        "tokens, nats)"),
        font=style.FONT, height=style.LINE_PLOT_HEIGHT, plot_bgcolor="white",
        margin=dict(l=10, r=10, t=60, b=10),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0.0),
        xaxis=dict(title="training step", gridcolor="#eeeeee"),
        yaxis=dict(title="loss (nats)", gridcolor="#eeeeee", rangemode="tozero"))
    return figure


def recipe_table(example) -> pd.DataFrame:
    """One passage after the recipe (a models.experiments.masked_lm.RecipeExample): each token,
    what the model reads there, and whether the loss asks for it."""
    return pd.DataFrame({"token": display_tokens(example.tokens),
                         "the model reads": display_tokens(example.read),
                         "chosen for the loss": [FATE_LABELS[f] for f in example.fates]})


def sentence_pairs_table(pairs) -> pd.DataFrame:
    """Next-sentence prediction's training pairs (models.experiments.masked_lm.SentencePair)."""
    return pd.DataFrame({"sentence A": [p.first for p in pairs],
                         "sentence B": [p.second for p in pairs],
                         "label": ["IsNext" if p.is_next else "NotNext" for p in pairs]})
