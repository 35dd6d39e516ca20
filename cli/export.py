"""`attention-explorer export`: one view of one input written to a file, without a browser session.

The view is drawn by the same viz/ functions the pages call and turned into bytes by
viz.export_figures (HTML, SVG, PDF, PNG) or viz.export (NPZ, CSV, JSON): nothing here draws or
writes a format of its own.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from cli.export_request import (ALL_HEADS, CSV, DATA_FORMATS, HEAD_VIEW, HEATMAP, JSON,
                                MODEL_VIEW, NPZ, ROLLOUT, STATISTICS, ExportRequest,
                                check_writable)
from models.hooks.access import Attention, read
from models.hooks.record import AttentionRecord
from models.loading.source import load
from viz import bertviz_views
from viz.export import head_csv, layer_json, record_npz
from viz.export_figures import (HTML, ExportError, bertviz_svg, figure_image, figures_html,
                                title_for, titled_page)
from viz.heatmap import attention_heatmap
from viz.overview import all_heads_figure
from viz.rollout import rollout_figures
from viz.statistics import statistic_heatmap, statistics_csv
from viz.theme import as_drawn

BERTVIZ = {HEAD_VIEW: bertviz_views.HEAD_VIEW, MODEL_VIEW: bertviz_views.MODEL_VIEW}
JSON_DECIMALS = 6  # rollout and statistics numbers in JSON
Progress = Callable[[str], None]


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
    return [as_drawn(figure, request.presenter) for figure in figures], title


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
