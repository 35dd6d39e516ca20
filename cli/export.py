"""`attention-explorer export`: one view of one input written to a file, without a browser session.

The view is drawn by the same viz/ functions the pages call and turned into bytes by
viz.export_figures (HTML, SVG, PDF, PNG) or viz.export (NPZ, CSV, JSON): nothing here draws or
writes a format of its own.
"""

from __future__ import annotations

import argparse
import io
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from models.analysis.statistics import NUMERIC_COLUMNS
from models.hooks.access import Attention, read
from models.hooks.record import AttentionRecord
from models.loading.source import load
from viz import bertviz_views
from viz.export import head_csv, layer_json, record_npz
from viz.export_figures import (BERTVIZ_FORMATS, FIGURE_FORMATS, HTML, ExportError,
                                bertviz_svg, figure_image, figures_html, title_for, titled_page)
from viz.heatmap import attention_heatmap
from viz.overview import all_heads_figure
from viz.rollout import rollout_figures
from viz.statistics import statistic_heatmap, statistics_csv
from viz.theme import themed

HEATMAP, ALL_HEADS, MODEL_VIEW, HEAD_VIEW, ROLLOUT, STATISTICS = (
    "heatmap", "all_heads", "model_view", "head_view", "rollout", "statistics")
VIEWS = (HEATMAP, ALL_HEADS, MODEL_VIEW, HEAD_VIEW, ROLLOUT, STATISTICS)
BERTVIZ = {HEAD_VIEW: bertviz_views.HEAD_VIEW, MODEL_VIEW: bertviz_views.MODEL_VIEW}
NPZ, CSV, JSON = "npz", "csv", "json"
DATA_FORMATS = (NPZ, CSV, JSON)
FORMATS = (*FIGURE_FORMATS, *DATA_FORMATS)
JSON_DECIMALS = 6  # rollout and statistics numbers in JSON

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ExportRequest:
    """What `export` writes: a view (VIEWS) of `text` (and `pair`) read by `model`, as
    `file_format` (FORMATS). `layer`/`head` None mean the view's default (the last layer for
    rollout, else layer 0, head 0)."""

    model: str
    text: str
    view: str
    file_format: str
    pair: str | None = None
    layer: int | None = None
    head: int | None = None
    scale: float = 1.0
    presenter: bool = False
    statistic: str = NUMERIC_COLUMNS[0]

    def check(self) -> None:
        """Refuse, before any model is loaded, what no input could give."""
        if self.view not in VIEWS:
            raise ExportError(f"'{self.view}' is not a view: use one of {', '.join(VIEWS)}.")
        if self.file_format not in FORMATS:
            raise ExportError(f"'{self.file_format}' is not a format: use one of "
                              f"{', '.join(FORMATS)}.")
        if self.view in BERTVIZ and self.file_format in FIGURE_FORMATS \
                and self.file_format not in BERTVIZ_FORMATS:
            raise ExportError(f"bertviz's {self.view} is written as "
                              f"{' or '.join(BERTVIZ_FORMATS)} (or as data: npz, csv, json).")
        if self.view == STATISTICS and self.file_format == NPZ:
            raise ExportError("The statistics table is written as csv or json, or drawn.")
        if self.statistic not in NUMERIC_COLUMNS:
            raise ExportError(f"'{self.statistic}' is not a statistic: use one of "
                              f"{', '.join(NUMERIC_COLUMNS)}.")
        if not self.text.strip():
            raise ExportError("The text is empty: give --text some words.")


def check_writable(out: Path) -> None:
    """One sentence, before any slow work, when `out` cannot be written."""
    folder = out.parent if str(out.parent) else Path(".")
    if out.is_dir():
        raise ExportError(f"{out} is a folder: give --out a file name.")
    if not folder.is_dir():
        raise ExportError(f"The folder {folder} does not exist.")
    if not os.access(folder, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise ExportError(f"{out} cannot be written here (permission denied).")


def _layer_head(request: ExportRequest, attention: Attention) -> tuple[int, int]:
    layers, heads = attention.num_layers, attention.num_heads
    default_layer = layers - 1 if request.view == ROLLOUT else 0
    layer = default_layer if request.layer is None else request.layer
    head = 0 if request.head is None else request.head
    if not 0 <= layer < layers:
        raise ExportError(f"Layer {layer} does not exist: this model has {layers} layers "
                          f"(0 to {layers - 1}).")
    if not 0 <= head < heads:
        raise ExportError(f"Head {head} does not exist: this model has {heads} heads per layer "
                          f"(0 to {heads - 1}).")
    return layer, head


def _figures(request: ExportRequest, attention: Attention, record: AttentionRecord,
             layer: int, head: int) -> tuple[list[go.Figure], str]:
    """The view's Plotly figures (rollout: its raw map, then the rollout) and the file's title."""
    if request.view == HEATMAP:
        figures = [attention_heatmap(record, layer, head)]
        title = title_for("Attention map", record.tokens, layer, head)
    elif request.view == ALL_HEADS:
        figures = [all_heads_figure(attention.summary().thumbnails, (layer, head))]
        title = title_for("All heads", record.tokens, layer, head)
    elif request.view == ROLLOUT:
        maps = attention.summary().rollout.exact(layer)
        figures = list(rollout_figures(maps.raw, maps.rolled, record.tokens, layer))
        title = title_for("Attention rollout", record.tokens, layer)
    else:
        figures = [statistic_heatmap(attention.summary().statistics, request.statistic)]
        title = title_for(f"Head statistics ({request.statistic})", record.tokens)
    return [themed(figure, request.presenter) for figure in figures], title


def _bertviz_page(request: ExportRequest, record: AttentionRecord) -> str:
    kind = BERTVIZ[request.view]
    choice = (bertviz_views.ViewChoice(kind) if kind == bertviz_views.HEAD_VIEW
              else bertviz_views.default_model_choice(record))
    if not bertviz_views.fits(record, choice):
        raise ExportError(f"bertviz's {request.view} draws at most "
                          f"{bertviz_views.max_tokens(record, choice)} tokens of this model; "
                          f"this text has {record.num_tokens}: shorten it or use heatmap.")
    page = bertviz_views.view_html(record, choice)
    return titled_page(page, title_for(f"bertviz {request.view}", record.tokens))


def _matrix_frame(matrix: np.ndarray, tokens: tuple[str, ...]) -> pd.DataFrame:
    labels = [f"#{i} {token}" for i, token in enumerate(tokens)]
    return pd.DataFrame(matrix, index=labels, columns=labels)


def _data(request: ExportRequest, attention: Attention, record: AttentionRecord, layer: int,
          head: int) -> bytes:
    """The numbers behind the view: a head (CSV) or a layer (JSON) of attention, every head
    (NPZ); the rollout's maps of `layer`; the statistics table."""
    if request.view == STATISTICS:
        table = attention.summary().statistics
        if request.file_format == CSV:
            return statistics_csv(table)
        return table.to_json(orient="records", double_precision=JSON_DECIMALS).encode("utf-8")
    if request.view == ROLLOUT and request.file_format != NPZ:
        maps = attention.summary().rollout.exact(layer)
        if request.file_format == CSV:
            return _matrix_frame(maps.rolled, record.tokens).to_csv(
                float_format="%.6g").encode("utf-8")
        return json.dumps({"tokens": list(record.tokens), "layer": layer,
                           "raw": np.round(maps.raw, JSON_DECIMALS).tolist(),
                           "rollout": np.round(maps.rolled, JSON_DECIMALS).tolist()}).encode()
    if request.file_format == CSV:
        return head_csv(record, layer, head)
    if request.file_format == JSON:
        return layer_json(record, layer)
    return record_npz(record)


def export_bytes(request: ExportRequest, attention: Attention,
                 progress: Progress = lambda message: None) -> bytes:
    """The file `request` asks for, of an input already read whole (`attention.whole`)."""
    record = attention.record
    layer, head = _layer_head(request, attention)
    if request.file_format in DATA_FORMATS:
        return _data(request, attention, record, layer, head)
    if request.view in BERTVIZ:
        page = _bertviz_page(request, record)
        if request.file_format == HTML:
            return page.encode("utf-8")
        progress("drawing the view in headless Chromium")
        return bertviz_svg(page)
    figures, title = _figures(request, attention, record, layer, head)
    if request.file_format == HTML:
        return figures_html(figures, title).encode("utf-8")
    progress(f"drawing {request.file_format.upper()} with Kaleido and Chromium")
    return figure_image(figures[-1], request.file_format, request.scale)


def run_export(request: ExportRequest, out: Path, progress: Progress) -> int:
    """Load the model, read the text, write the file; returns the bytes written."""
    request.check()
    check_writable(out)
    progress(f"loading the model '{request.model}'")
    loaded = load(request.model)
    progress(f"reading the text with {loaded.label}")
    attention = read(loaded, request.text, request.pair, long=False)
    if attention.dropped_tokens:
        progress(f"the text was cut to the model's {attention.num_tokens} tokens")
    data = export_bytes(request, attention, progress)
    try:
        with io.open(out, "wb") as handle:
            handle.write(data)
    except OSError as error:
        raise ExportError(f"{out} cannot be written ({error.strerror or error}).") from None
    return len(data)


def add_parser(commands) -> None:
    export = commands.add_parser(
        "export", help="write one view of one input to a file (HTML, SVG, PDF, PNG or data)",
        description=(
            "Read TEXT with the model and write one view to FILE without a browser session. "
            "html: one page that opens offline (plotly.js, or bertviz's scripts, inlined), "
            "titled with the view, layer, head and tokens. svg, pdf, png: the Plotly views "
            "drawn by Kaleido with the system's Chromium (rollout: the rollout map; the HTML "
            "holds the raw map too); bertviz's head_view and model_view as svg, drawn in "
            "headless Chromium. npz (every head), csv (one head; rollout: its map; statistics: "
            "the table), json (one layer; rollout: both maps; statistics: the table)."))
    export.add_argument("--model", default="encoder",
                        help="encoder (the embedded MiniLM, the default), decoder (the embedded "
                             "SmolLM2), KIND:NAME, a Hugging Face id or a local folder")
    export.add_argument("--text", required=True, help="the input text")
    export.add_argument("--pair", default=None, help="a second sentence (encoders)")
    export.add_argument("--view", required=True, choices=VIEWS, help="what to draw")
    export.add_argument("--layer", type=int, default=None,
                        help="the layer (default 0; rollout: the last layer)")
    export.add_argument("--head", type=int, default=None, help="the head (default 0)")
    export.add_argument("--statistic", default=NUMERIC_COLUMNS[0], choices=NUMERIC_COLUMNS,
                        help="the statistics view's colour (default %(default)s)")
    export.add_argument("--format", dest="file_format", required=True, choices=FORMATS,
                        help="the file's format")
    export.add_argument("--scale", type=float, default=1.0,
                        help="PNG: pixels per screen pixel (default 1; 2 for slides)")
    export.add_argument("--presenter", action="store_true",
                        help="the presenter's large, dark text (as the app's Presenter mode)")
    export.add_argument("--out", required=True, type=Path, metavar="FILE",
                        help="the file to write")


def request_of(arguments: argparse.Namespace) -> ExportRequest:
    return ExportRequest(model=arguments.model, text=arguments.text, pair=arguments.pair,
                         view=arguments.view, file_format=arguments.file_format,
                         layer=arguments.layer, head=arguments.head, scale=arguments.scale,
                         presenter=arguments.presenter, statistic=arguments.statistic)
