"""What `attention-explorer export` is asked for: its views and formats, its arguments, and the
checks made before any model is loaded. Nothing here imports torch, so `--help` and a mistaken
argument answer at once; cli/export.py does the work.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from models.analysis.columns import NORM_COLUMNS, NUMERIC_COLUMNS
from viz.export_figures import BERTVIZ_FORMATS, FIGURE_FORMATS, ExportError

HEATMAP, ALL_HEADS, MODEL_VIEW, HEAD_VIEW, ROLLOUT, STATISTICS = (
    "heatmap", "all_heads", "model_view", "head_view", "rollout", "statistics")
VIEWS = (HEATMAP, ALL_HEADS, MODEL_VIEW, HEAD_VIEW, ROLLOUT, STATISTICS)
BERTVIZ_VIEWS = (HEAD_VIEW, MODEL_VIEW)  # drawn by bertviz, not Plotly
NPZ, CSV, JSON = "npz", "csv", "json"
DATA_FORMATS = (NPZ, CSV, JSON)
FORMATS = (*FIGURE_FORMATS, *DATA_FORMATS)
STATISTICS_DRAWN = NUMERIC_COLUMNS + NORM_COLUMNS  # the norm-based shares: on the model's tokens


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
        if self.view in BERTVIZ_VIEWS and self.file_format in FIGURE_FORMATS \
                and self.file_format not in BERTVIZ_FORMATS:
            raise ExportError(f"bertviz's {self.view} is written as "
                              f"{' or '.join(BERTVIZ_FORMATS)} (or as data: npz, csv, json).")
        if self.view == STATISTICS and self.file_format == NPZ:
            raise ExportError("The statistics table is written as csv or json, or drawn.")
        if self.statistic not in STATISTICS_DRAWN:
            raise ExportError(f"'{self.statistic}' is not a statistic: use one of "
                              f"{', '.join(STATISTICS_DRAWN)}.")
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
    export.add_argument("--statistic", default=NUMERIC_COLUMNS[0], choices=STATISTICS_DRAWN,
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
