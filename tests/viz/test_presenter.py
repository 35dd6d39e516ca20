"""Presenter mode, the colour-blind-safe palette, figure downloads and long-input tick labels."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import plotly.colors
import pytest

from models.experiments.predictions import Candidate
from models.hooks.record import AttentionRecord
from tests.app_support import ROOT, figures, run_page
from ui.charts import chart_config
from ui.state import PRESENTER_CSS
from viz import palettes, style, theme
from viz.heatmap import attention_heatmap, layer_heads_grid
from viz.positions import sinusoid_heatmap
from viz.predictions import candidate_bars
from viz.span import ramp_figure

SAFE = style.SAFE_PALETTE
WORDS_600 = " ".join(f"word{i % 50}" for i in range(600))


def make_record(tokens, layers=2, heads=3, seed=0) -> AttentionRecord:
    rng = np.random.default_rng(seed)
    raw = rng.random((layers, heads, len(tokens), len(tokens)))
    return AttentionRecord(tokens=tuple(tokens), weights=raw / raw.sum(-1, keepdims=True),
                           source="synthetic")


def wcag_luminance(hex_colour: str) -> float:
    """WCAG 2.x relative luminance, written out from the definition."""
    value = hex_colour.lstrip("#")
    channels = []
    for i in (0, 2, 4):
        srgb = int(value[i:i + 2], 16) / 255
        channels.append(srgb / 12.92 if srgb <= 0.04045 else ((srgb + 0.055) / 1.055) ** 2.4)
    red, green, blue = channels
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def wcag_contrast(first: str, second: str) -> float:
    high, low = sorted((wcag_luminance(first), wcag_luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def figure_kinds():
    record = make_record(["[CLS]", "time", "flies", "like", "an", "arrow", "[SEP]"], heads=6)
    bars = candidate_bars(tuple(Candidate(i, f"w{i}", f" w{i}", p) for i, p in
                                enumerate((0.5, 0.3, 0.2))), "Top tokens", 1)
    return {
        "heatmap": attention_heatmap(record, 1, 2),
        "subplots": layer_heads_grid(record, 1),
        "bars": bars,
        "lines": ramp_figure(np.linspace(0, 10, 50), np.clip((6 - np.linspace(0, 10, 50)) / 2,
                                                             0, 1), 4.0, 2.0),
        "diverging": sinusoid_heatmap(np.sin(np.arange(40).reshape(8, 5))),
    }


# --- contrast ----------------------------------------------------------------------------------

def test_presenter_text_colour_has_at_least_7_to_1_contrast_on_white():
    assert wcag_contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert wcag_contrast("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)  # WCAG's example
    ratio = wcag_contrast(style.PRESENTER_TEXT_COLOR, "#ffffff")
    assert ratio >= 7.0
    assert palettes.contrast_ratio(style.PRESENTER_TEXT_COLOR, "#ffffff") == pytest.approx(ratio)
    for colour in ("#111111", "#333333"):  # the presenter CSS's text and caption colours
        assert colour in PRESENTER_CSS and wcag_contrast(colour, "#ffffff") >= 7.0


# --- presenter text on every kind of figure ------------------------------------------------------

@pytest.mark.parametrize("kind", ["heatmap", "subplots", "bars", "lines", "diverging"])
def test_presenter_mode_makes_every_text_large_and_dark(kind):
    figure = figure_kinds()[kind]
    before = json.loads(figure.to_json())
    shown = theme.themed(figure, presenter=True, palette=style.STANDARD_PALETTE)
    assert json.loads(figure.to_json()) == before  # the original is untouched
    layout = shown.layout
    dark = style.PRESENTER_TEXT_COLOR
    assert layout.font.size >= 18 and layout.font.color == dark
    assert layout.title.font.size >= 24 and layout.title.font.color == dark
    assert layout.hoverlabel.font.size >= 18 and layout.legend.font.size >= 18
    axes = [layout[name] for name in layout if name.startswith(("xaxis", "yaxis"))]
    assert axes and len(axes) == len([n for n in figure.layout if n.startswith(("xaxis", "yaxis"))])
    for axis in axes:
        assert axis.tickfont.size >= 18 and axis.tickfont.color == dark
        assert axis.title.font.size >= 18 and axis.title.font.size > axis.tickfont.size - 1
    for annotation in layout.annotations:  # subplot titles, notes on lines
        assert annotation.font.size >= 18
        assert wcag_contrast(annotation.font.color, "#ffffff") >= 7.0
    bars = [t.colorbar for t in shown.data if "colorbar" in t and t.showscale is not False]
    bars += [layout[n].colorbar for n in layout if n.startswith("coloraxis")]
    for bar in bars:
        assert bar.tickfont.size >= 18 and bar.title.font.size >= 18
    assert layout.title.font.size > max(axis.tickfont.size for axis in axes)
    if kind == "subplots":
        # 6 heads in 2 rows x 4 columns: one x axis per column, one y axis per row
        assert len(layout.annotations) == 6 and len(axes) == 4 + 2
    if kind == "bars":
        assert shown.data[0].textfont.size >= 18


def test_nothing_asked_returns_the_same_figure_and_bad_palette_is_refused():
    figure = figure_kinds()["heatmap"]
    assert theme.themed(figure, presenter=False, palette=style.STANDARD_PALETTE) is figure
    with pytest.raises(ValueError):
        theme.themed(figure, presenter=False, palette="rainbow")


def _plot_px(figure) -> int:
    return figure.layout.height - figure.layout.margin.t - figure.layout.margin.b


def test_a_larger_title_adds_its_room_to_a_fixed_height_figure_up_to_the_screen():
    """The all-heads mosaic (30 layers across, 9 heads down, height sized for its tiles): the
    presenter title and the upright top labels take more margin, which is added to the figure's
    height, not taken from its tiles (they shrank from 31 to 24 px on a projector)."""
    from models.analysis.pooling import pool
    from viz.overview import all_heads_figure

    thumbnails = pool(np.random.default_rng(0).random((30, 9, 6, 6)).astype(np.float32), 64)
    light = all_heads_figure(thumbnails, (0, 0))
    presented = theme.as_drawn(light, presenter=True)
    assert presented.layout.margin.t > light.layout.margin.t
    assert _plot_px(presented) == _plot_px(light)
    # the top labels, thinned to fit upright, take one line of presenter text, not their length
    band = style.PRESENTER_FONT_PX * style.PRESENTER_LINE_FACTOR + style.PRESENTER_AXIS_GAP_PX
    title = style.PRESENTER_TITLE_PX * style.PRESENTER_LINE_FACTOR
    assert presented.layout.margin.t == round(2 * style.PRESENTER_TITLE_PAD_PX + title + band
                                              + style.PRESENTER_AXIS_GAP_PX)
    tall = go_figure_of_height(style.PRESENTER_MAX_HEIGHT_PX - 10)
    grown = theme.as_drawn(tall, presenter=True)
    assert grown.layout.margin.t > tall.layout.margin.t
    assert grown.layout.height == style.PRESENTER_MAX_HEIGHT_PX  # never past the screen's room


def test_a_presenter_title_wraps_at_a_third_of_the_screen_or_at_its_wide_figures_width():
    title = "All 30 layers × 9 heads (each map max-pooled to 64×64)"  # 55 characters
    free = go_figure_of_height(400)
    free.update_layout(title=title)
    assert theme.as_drawn(free, presenter=True).layout.title.text.count("<br>") == 1
    wide = go_figure_of_height(400)
    wide.update_layout(title=title, width=1090, margin=dict(l=10, r=10))
    assert theme.as_drawn(wide, presenter=True).layout.title.text == title  # 74 fit in 1070 px
    # a map's fixed width is nominal (Streamlit stretches it to its column: half of a page
    # beside an open sidebar is 391 px): its title wraps at the third's width
    nominal = go_figure_of_height(400)
    nominal.update_layout(title=title, width=657, margin=dict(l=10, r=10))
    lines = theme.as_drawn(nominal, presenter=True).layout.title.text.split("<br>")
    assert len(lines) == 2 and max(map(len, lines)) <= style.PRESENTER_TITLE_CHARS
    narrow = go_figure_of_height(400)
    narrow.update_layout(title=title, width=300)
    lines = theme.as_drawn(narrow, presenter=True).layout.title.text.split("<br>")
    assert len(lines) == 2 and max(map(len, lines)) <= style.PRESENTER_TITLE_CHARS


def go_figure_of_height(height: int):
    import plotly.graph_objects as go

    figure = go.Figure(go.Heatmap(z=[[0, 1], [1, 0]]))
    figure.update_layout(height=height, margin=dict(t=40, b=10),
                         title="A title long enough to wrap onto a second line in presenter mode")
    return figure


# --- the colour-blind-safe palette ---------------------------------------------------------------

def _scale_colours(scale) -> list[str]:
    return [entry[1].lower() for entry in scale]


def _named(name: str) -> list[str]:
    return [entry[1].lower() for entry in plotly.colors.get_colorscale(name)]


def test_safe_palette_swaps_sequential_diverging_and_categorical_colours():
    kinds = figure_kinds()
    heatmap = theme.themed(kinds["heatmap"], presenter=False, palette=SAFE)
    # Blues runs light to dark; its replacement keeps that direction (reversed cividis).
    assert _scale_colours(heatmap.data[0].colorscale) == _named("cividis_r")
    grid = theme.themed(kinds["subplots"], presenter=False, palette=SAFE)
    assert _scale_colours(grid.layout.coloraxis.colorscale) == _named("cividis_r")
    diverging = theme.themed(kinds["diverging"], presenter=False, palette=SAFE)
    assert _scale_colours(diverging.data[0].colorscale) == _named(style.SAFE_DIVERGING)
    okabe = {c.lower() for c in style.OKABE_ITO}
    bars = theme.themed(kinds["bars"], presenter=False, palette=SAFE)
    before = list(kinds["bars"].data[0].marker.color)
    after = [c.lower() for c in bars.data[0].marker.color]
    assert set(after) <= okabe and len(set(after)) == len(set(before)) == 2
    assert [a == after[0] for a in after] == [b == before[0] for b in before]  # same grouping
    lines = theme.themed(kinds["lines"], presenter=False, palette=SAFE)
    for trace in lines.data:
        colour = trace.line.color if trace.mode == "lines" else trace.marker.color
        assert colour.lower() in okabe
    for shape in lines.layout.shapes:  # the ramp band keeps its transparency
        if shape.fillcolor:
            assert shape.fillcolor.startswith("rgba(") and shape.fillcolor.endswith(", 0.25)")


# --- long inputs: thinned labels that never pile up ---------------------------------------------

def _fits(figure, axis_name: str) -> tuple[int, float]:
    """(labels, axis length in px) for a heatmap axis, using the figure's own size and margins."""
    layout = figure.layout
    axis = layout[axis_name]
    height = layout.height - layout.margin.t - layout.margin.b
    width = layout.width - layout.margin.l - layout.margin.r - style.COLORBAR_ALLOWANCE_PX
    length = min(height, width)  # square cells
    return len(axis.ticktext), length


@pytest.mark.parametrize("presenter", [False, True])
def test_600_words_keep_their_tick_labels_apart_and_every_cell_named_on_hover(presenter):
    words = WORDS_600.split()
    record = make_record(words, layers=1, heads=1)
    figure = theme.themed(attention_heatmap(record, 0, 0), presenter=presenter)
    for name in ("xaxis", "yaxis"):
        axis = figure.layout[name]
        font = axis.tickfont.size or figure.layout.font.size
        count, length = _fits(figure, name)
        assert 10 <= count < len(words)
        assert count * font <= length, (name, count, font, length)
        if name == "xaxis" and axis.tickangle not in (None, -90, 90):
            slant = abs(np.sin(np.radians(axis.tickangle)))
            assert count * font / slant <= length
        positions = [int(str(v).rsplit("#", 1)[1]) for v in axis.tickvals]
        gaps = np.diff(positions)
        assert positions[0] == 0 and positions[-1] == len(words) - 1
        assert len(set(gaps[:-1])) == 1 and gaps[-1] >= gaps[0]  # every n-th, and the last
    trace = figure.data[0]
    assert len(trace.x) == len(words) and trace.x[599] == "word49 #599"  # hover names each cell
    assert "%{x}" in trace.hovertemplate and "%{y}" in trace.hovertemplate


def test_short_inputs_keep_every_label():
    record = make_record(["[CLS]", *[f"w{i}" for i in range(20)], "[SEP]"], layers=1, heads=1)
    for presenter in (False, True):
        figure = theme.themed(attention_heatmap(record, 0, 0), presenter=presenter)
        assert len(figure.layout.xaxis.ticktext) == 22 and len(figure.layout.yaxis.ticktext) == 22


# --- downloads --------------------------------------------------------------------------------

def test_chart_config_saves_png_at_scale_2_or_svg_named_after_the_key():
    png = chart_config("maps_heatmap", "PNG")["toImageButtonOptions"]
    assert png == {"format": "png", "filename": "maps_heatmap", "scale": 2}
    svg = chart_config("maps_heatmap", "SVG")["toImageButtonOptions"]
    assert svg == {"format": "svg", "filename": "maps_heatmap"}


def test_page_in_presenter_mode_sends_themed_figures_svg_download_and_the_css():
    at = run_page("attention_maps", text=WORDS_600,
                  state={"sb_presenter": True, "sb_palette_safe": True, "sb_figure_format": "SVG"})
    assert not at.error, [e.value for e in at.error]
    charts = at.get("plotly_chart")
    assert len(charts) >= 2
    for chart in charts:
        options = json.loads(chart.proto.config)["toImageButtonOptions"]
        assert options["format"] == "svg" and options["filename"].startswith("maps_")
    heatmap = figures(at)[0]
    layout = heatmap["layout"]
    assert layout["xaxis"]["tickfont"]["size"] >= 18 and layout["title"]["font"]["size"] >= 24
    assert [c[1] for c in heatmap["data"][0]["colorscale"]][-1].lower() == \
        _named("cividis_r")[-1]
    count = len(layout["yaxis"]["ticktext"])
    assert count * layout["yaxis"]["tickfont"]["size"] <= layout["height"]
    assert [m.value for m in at.html].count(PRESENTER_CSS) == 1  # once, beside the page's own
    assert "<script" not in PRESENTER_CSS and "http" not in PRESENTER_CSS
    assert "font-size: 18px" in PRESENTER_CSS


def test_default_mode_sends_plain_figures_png_download_and_no_css():
    at = run_page("attention_maps", text="Time flies like an arrow.")
    assert not at.error, [e.value for e in at.error]
    options = json.loads(at.get("plotly_chart")[0].proto.config)["toImageButtonOptions"]
    assert options == {"format": "png", "filename": "maps_heatmap", "scale": 2}
    layout = figures(at)[0]["layout"]
    assert layout["font"]["size"] == style.FONT["size"]  # sizes untouched, only text colours
    assert layout["xaxis"]["tickfont"] == {"color": style.FIGURE_TEXT_COLOR}
    assert PRESENTER_CSS not in [m.value for m in at.html]
    assert at.toggle(key="sb_presenter").value is False
    assert at.radio(key="sb_figure_format").options == ["PNG", "SVG"]


# --- every page goes through ui.charts.show ------------------------------------------------------

def test_no_page_calls_plotly_chart_directly():
    offenders = []
    files = [*sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "ui").glob("*.py")),
             ROOT / "app.py"]
    for path in files:
        if path == ROOT / "ui" / "charts.py":
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "plotly_chart":
                offenders.append(f"{Path(path).relative_to(ROOT)}:{node.lineno}")
    assert offenders == [], "draw figures with ui.charts.show: " + ", ".join(offenders)
