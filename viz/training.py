"""Figures for fine-tuning: the loss curve, held-out accuracy per epoch, and what changed.

Training results come from models/experiments/finetune.py and are read by attribute (viz/ imports only
records from models/): `.step_losses`, `.epochs` (each `.epoch`, `.train_loss`,
`.held_out_loss`, `.held_out_accuracy`), `.train_size`, `.settings.batch_size`,
`.class_names`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from models.hooks.record import AttentionRecord
from viz import style
from viz.compare import difference_heatmap
from viz.heatmap import matrix_heatmap
from viz.labels import numbered_labels

SERIES_COLOURS = (style.SCALED_COLOR, style.UNSCALED_COLOR)  # pretrained, from scratch
BEFORE_COLOUR = "#9ecae1"
AFTER_COLOUR = "#08519c"
CHANCE_COLOUR = "#636363"
DATA_PLOT_PX = 300
LEGEND_PX = 110  # room under a line plot for a legend of up to four long names


def _line_layout(figure: go.Figure, title: str, x_title: str, y_title: str) -> go.Figure:
    figure.update_layout(
        title=dict(text=title), font=style.FONT, height=style.LINE_PLOT_HEIGHT + LEGEND_PX,
        margin=dict(l=10, r=10, t=60, b=LEGEND_PX), plot_bgcolor="white",
        legend=dict(orientation="h", yanchor="top", y=-0.18, xanchor="left", x=0.0),
        xaxis=dict(title=x_title, gridcolor="#eeeeee", rangemode="tozero"),
        yaxis=dict(title=y_title, gridcolor="#eeeeee", rangemode="tozero"),
    )
    return figure


def data_figure(class_names, train_counts, held_out_counts) -> go.Figure:
    """Sentences per class, stacked: the part trained on and the part held out."""
    figure = go.Figure()
    for name, counts, colour in (("trained on", train_counts, AFTER_COLOUR),
                                 ("held out", held_out_counts, BEFORE_COLOUR)):
        figure.add_trace(go.Bar(x=list(class_names), y=list(counts), name=name,
                                marker_color=colour,
                                hovertemplate="%{x}: %{y} sentences<extra>" + name + "</extra>"))
    figure.update_layout(
        barmode="stack", title=dict(text="The labelled sentences, per class"), font=style.FONT,
        height=DATA_PLOT_PX, margin=dict(l=10, r=10, t=60, b=40), plot_bgcolor="white",
        legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1.0, xanchor="right"),
        xaxis=dict(type="category", title="label"),
        yaxis=dict(title="sentences", gridcolor="#eeeeee"),
    )
    return figure


def steps_per_epoch(result) -> int:
    return -(-result.train_size // result.settings.batch_size)


def loss_figure(results: dict) -> go.Figure:
    """Training loss after every step (thin) and held-out loss after every epoch (markers),
    on an axis counted in epochs so models trained for different lengths line up."""
    figure = go.Figure()
    for (name, result), colour in zip(results.items(), SERIES_COLOURS):
        per_epoch = steps_per_epoch(result)
        steps = np.arange(1, len(result.step_losses) + 1) / per_epoch
        figure.add_trace(go.Scatter(
            x=steps, y=list(result.step_losses), mode="lines", name=f"{name}: training loss",
            line=dict(color=colour, width=1.5),
            hovertemplate="epoch %{x:.2f}<br>training loss %{y:.3f}<extra></extra>",
        ))
        figure.add_trace(go.Scatter(
            x=[e.epoch for e in result.epochs], y=[e.held_out_loss for e in result.epochs],
            mode="markers+lines", name=f"{name}: held-out loss",
            line=dict(color=colour, dash="dot"), marker=dict(size=9, symbol="diamond"),
            hovertemplate="after epoch %{x}<br>held-out loss %{y:.3f}<extra></extra>",
        ))
    return _line_layout(figure, "Loss (cross-entropy) while training", "epoch", "loss")


def accuracy_figure(results: dict, num_classes: int) -> go.Figure:
    """Held-out accuracy before training (epoch 0) and after every epoch, with chance level."""
    figure = go.Figure()
    longest = 1
    for (name, result), colour in zip(results.items(), SERIES_COLOURS):
        epochs = [e.epoch for e in result.epochs]
        longest = max(longest, epochs[-1])
        figure.add_trace(go.Scatter(
            x=epochs, y=[e.held_out_accuracy for e in result.epochs], mode="markers+lines",
            name=name, line=dict(color=colour), marker=dict(size=9),
            hovertemplate="after epoch %{x}<br>held-out accuracy %{y:.1%}<extra></extra>",
        ))
    chance = 1.0 / num_classes
    figure.add_trace(go.Scatter(
        x=[0, longest], y=[chance, chance], mode="lines", name=f"chance ({chance:.0%})",
        line=dict(color=CHANCE_COLOUR, dash="dash"), hoverinfo="skip",
    ))
    figure = _line_layout(figure, "Held-out accuracy (sentences never trained on)",
                          "epoch (0 = before training)", "accuracy")
    figure.update_yaxes(range=[0, 1.02], tickformat=".0%")
    return figure


def accuracy_table(results: dict) -> pd.DataFrame:
    """One row per model: accuracy before and after, epochs and seconds."""
    return pd.DataFrame([{
        "model": name,
        "held-out accuracy before": result.epochs[0].held_out_accuracy,
        "held-out accuracy after": result.epochs[-1].held_out_accuracy,
        "epochs": result.epochs[-1].epoch,
        "seconds": round(result.seconds, 1),
    } for name, result in results.items()])


def probabilities_figure(before, after) -> go.Figure:
    """Class probabilities for one sentence before and after fine-tuning (grouped bars).
    `before`/`after` have `.class_names` and `.probabilities`."""
    figure = go.Figure()
    for name, prediction, colour in (("before", before, BEFORE_COLOUR),
                                     ("after", after, AFTER_COLOUR)):
        figure.add_trace(go.Bar(
            x=list(prediction.class_names), y=list(prediction.probabilities),
            name=f"{name} fine-tuning", marker_color=colour,
            hovertemplate="%{x}: %{y:.1%}<extra>" + name + "</extra>",
        ))
    figure.update_layout(
        barmode="group", title=dict(text="The sentence's class probabilities"), font=style.FONT,
        height=style.LINE_PLOT_HEIGHT - 60, margin=dict(l=10, r=10, t=60, b=40),
        plot_bgcolor="white", legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1.0,
                                          xanchor="right"),
        yaxis=dict(range=[0, 1], tickformat=".0%", title="probability", gridcolor="#eeeeee"),
    )
    return figure


def cls_row_figure(before: AttentionRecord, after: AttentionRecord, layer: int,
                   head: int) -> go.Figure:
    """Where the first token ([CLS]) looks, in one head, before and after fine-tuning."""
    if before.tokens != after.tokens:
        raise ValueError("the two records must be for the same tokens")
    labels = numbered_labels(before.tokens)
    figure = go.Figure()
    for name, record, colour in (("before", before, BEFORE_COLOUR), ("after", after, AFTER_COLOUR)):
        figure.add_trace(go.Bar(
            x=labels, y=record.head(layer, head)[0], name=f"{name} fine-tuning",
            marker_color=colour, hovertemplate="key %{x}<br>weight %{y:.3f}<extra>" + name + "</extra>",
        ))
    figure.update_layout(
        barmode="group", font=style.FONT, height=style.LINE_PLOT_HEIGHT,
        title=dict(text=f"The {before.tokens[0]} row of layer {layer}, head {head}: where it looks"),
        margin=dict(l=10, r=10, t=60, b=90), plot_bgcolor="white",
        legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1.0, xanchor="right"),
        xaxis=dict(type="category", tickangle=-45, title="key"),
        yaxis=dict(range=[0, 1], title="weight", gridcolor="#eeeeee"),
    )
    return figure


def before_after_maps(before: AttentionRecord, after: AttentionRecord, layer: int,
                      head: int) -> tuple[go.Figure, go.Figure]:
    """One head's map before and after fine-tuning, on the same [0, 1] scale."""
    return tuple(matrix_heatmap(record.head(layer, head), record.tokens,
                                f"{name} fine-tuning · layer {layer}, head {head}")
                 for name, record in (("Before", before), ("After", after)))


def change_heatmap(table: pd.DataFrame) -> go.Figure:
    """compare_heads' layer x head map of differences, titled for before/after fine-tuning."""
    figure = difference_heatmap(table)
    figure.update_layout(title=dict(text="How much fine-tuning changed each head's attention"))
    return figure
