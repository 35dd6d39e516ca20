"""A view computed for one session is reused by the next (its figures built once per server,
kept in the byte-bounded trace store); each script run's time is logged when asked; the first
page's imports leave out what only other pages need."""

from __future__ import annotations

import json
import subprocess
import sys

import plotly.io

from models.store import stores
from models.store.byte_cache import array_bytes
from tests.app_support import ROOT, figures, run_page
from ui import views
from ui.kept import KeptFigure
from ui.timing import TIMING_LOG


def counting(monkeypatch, name: str) -> list[int]:
    """Count the calls ui.views makes to one of its figure builders."""
    calls: list[int] = []
    build = getattr(views, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return build(*args, **kwargs)

    monkeypatch.setattr(views, name, counted)
    return calls


def test_a_second_session_draws_the_same_view_without_building_its_figures(monkeypatch):
    text = "A second student opens the same link."
    heads, grids = counting(monkeypatch, "matrix_heatmap"), counting(monkeypatch, "heads_grid")
    first = run_page(text=text, state={"maps_layer": 2, "maps_head": 3})
    assert (len(heads), len(grids)) == (1, 1)
    second = run_page(text=text, state={"maps_layer": 2, "maps_head": 3})  # a new session
    assert (len(heads), len(grids)) == (1, 1)  # nothing built again
    assert figures(second) == figures(first)
    assert "Layer 2 · Head 3" in figures(second)[0]["layout"]["title"]["text"]
    run_page(text=text, state={"maps_layer": 2, "maps_head": 4})  # another head: its own figure
    assert (len(heads), len(grids)) == (2, 1)


def test_a_kept_figure_is_given_its_text_colours_once_and_every_session_sees_them(monkeypatch):
    from ui import charts
    from viz.style import FIGURE_TEXT_COLOR

    text = "Each run draws the kept figures as they are."
    copies: list[int] = []
    as_drawn = charts.as_drawn

    def counted(figure, presenter, palette):
        copies.append(1)
        return as_drawn(figure, presenter, palette)

    monkeypatch.setattr(charts, "as_drawn", counted)
    first = run_page(text=text, state={"maps_layer": 0, "maps_head": 1})
    assert len(copies) == 2  # the head's map and the layer's grid, the first time they are shown
    second = run_page(text=text, state={"maps_layer": 0, "maps_head": 1})
    assert len(copies) == 2  # a second session: no copy made again
    assert figures(second) == figures(first)
    for figure in figures(second):
        axes = [value for name, value in figure["layout"].items() if name[1:5] == "axis"]
        assert axes and all(axis["tickfont"]["color"] == FIGURE_TEXT_COLOR for axis in axes)
    run_page(text=text, state={"maps_layer": 0, "maps_head": 1, charts.PRESENTER: True})
    assert len(copies) == 4  # presenter mode themes a copy, which is then made readable


def test_a_kept_figure_is_counted_by_its_json_in_the_bounded_trace_store():
    text = "The store counts what a figure holds."
    run_page(text=text, state={"maps_layer": 1, "maps_head": 1})
    kept = [(key, value) for key, value in stores.TRACES.items()
            if isinstance(value, KeptFigure) and text in key.parts]
    assert len(kept) == 2  # the head's map and the layer's grid
    for key, figure in kept:
        assert figure.nbytes == len(plotly.io.to_json(figure.figure, validate=False)) > 1000
        assert array_bytes((key, figure)) >= figure.nbytes  # what the store's budget counts


def test_each_run_is_logged_with_its_session_page_and_times(monkeypatch, tmp_path):
    log = tmp_path / "timing.jsonl"
    monkeypatch.setenv(TIMING_LOG, str(log))
    run_page(text="Timing one run.")
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    assert runs and {run["page"] for run in runs} == {"Attention maps"}
    assert all(run["session"] and run["wall_s"] > 0 and 0 <= run["cpu_s"] for run in runs)
    monkeypatch.delenv(TIMING_LOG)
    run_page(text="Not timed.")
    assert len(log.read_text().splitlines()) == len(runs)  # unset: nothing written


START_IMPORTS = """
import json
import sys
from streamlit.testing.v1 import AppTest
at = AppTest.from_file({app!r}, default_timeout=300)
at.run()
assert not at.exception, at.exception
assert at.get("plotly_chart"), "the first page drew its heatmap"
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] in {names!r})))
"""


def test_the_first_page_does_not_import_what_only_other_pages_need():
    # training code (the deck's plain parsing, models.teaching.decks, is imported with the menu)
    later = ("bertviz", "IPython", "sklearn", "umap", "viz.bertviz_views", "ui.finetune_cache",
             "models.teaching.trained_translator", "models.teaching.seq2seq_training",
             "models.teaching.span_training", "models.teaching.layer_walk",
             "transformers.modeling_gguf_pytorch_utils")  # a GGUF conversion only
    tops = sorted({name.split(".")[0] for name in later} | {"viz", "ui", "models"})
    code = START_IMPORTS.format(app=str(ROOT / "app.py"), names=set(tops))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    imported = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert "ui.attention" in imported and "viz.heatmap" in imported  # what it does need
    assert not imported & set(later), sorted(imported & set(later))
