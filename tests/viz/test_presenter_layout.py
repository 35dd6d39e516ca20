"""Presenter layout of figures: titles wrap, notes go under the axis, stacked rows make room for
their labels and titles (the browser test tests/browser/test_browser_pages.py measures the drawn
result on every page)."""

from __future__ import annotations

import re

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz import presenter_room, style, theme

LONG = "Mean |q·k| of random standard-normal vectors grows like √d as d grows"


def test_wrapping_keeps_every_word_and_breaks_only_between_them():
    text = wrapped = style.wrapped(LONG + "<br>second paragraph", 20)
    assert wrapped.replace("<br>", " ").split() == (LONG + " second paragraph").split()
    lines = text.split("<br>")
    assert len(lines) >= 4 and all(len(line) <= 20 or " " not in line for line in lines)
    assert style.wrapped("short", 20) == "short"
    assert style.wrapped("a" * 50, 10) == "a" * 50  # a word longer than the width stays whole


def test_a_model_id_longer_than_a_line_breaks_after_its_slash_and_nowhere_else():
    title = "Learned by sentence-transformers/all-MiniLM-L6-v2"
    assert style.wrapped(title, 30).split("<br>") == [
        "Learned by", "sentence-transformers/", "all-MiniLM-L6-v2"]
    # an id that fits keeps its slash inside its line, with no space added
    assert style.wrapped("Learned by bert/tiny", 30) == "Learned by bert/tiny"
    assert style.wrapped("owner/" + "b" * 40, 30).split("<br>") == ["owner/", "b" * 40]


def _steps() -> go.Figure:
    figure = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                           subplot_titles=["1. first", "2. second", "3. third"])
    for row in (1, 2, 3):
        figure.add_trace(go.Bar(x=["alpha #0", "beta #1", "gamma #2"], y=[1, 2, 3]), row=row,
                         col=1)
    figure.update_xaxes(showticklabels=True, tickangle=-45)
    figure.update_layout(height=560, title=LONG, margin=dict(t=40, b=10))
    return figure


def test_stacked_rows_leave_room_for_the_labels_and_the_next_title():
    shown = theme.themed(_steps(), presenter=True)
    layout = shown.layout
    domains = [layout[name].domain for name in ("yaxis", "yaxis2", "yaxis3")]
    plot_px = layout.height - layout.margin.t - layout.margin.b
    band = presenter_room.tick_band_px(shown, layout.xaxis)
    for upper, lower in zip(domains, domains[1:]):
        assert upper[0] > lower[1]  # rows still in order, apart
        assert (upper[0] - lower[1]) * plot_px >= band + style.PRESENTER_FONT_PX
    titles = {a.text: a.y for a in layout.annotations}
    assert [titles["1. first"], titles["2. second"], titles["3. third"]] == \
        [domain[1] for domain in domains]
    plain = _steps()
    assert plain.layout.yaxis2.domain != domains[1]  # the original was too tight


def test_a_title_wraps_and_the_top_margin_holds_it():
    shown = theme.themed(_steps(), presenter=True)
    lines = shown.layout.title.text.split("<br>")
    assert len(lines) >= 2 and all(len(re.sub("<[^>]+>", "", line)) <=
                                   style.PRESENTER_TITLE_CHARS + 10 for line in lines)
    assert shown.layout.margin.t >= len(lines) * style.PRESENTER_TITLE_PX * \
        style.PRESENTER_LINE_FACTOR
    assert shown.layout.title.yref == "container"


def test_a_note_under_the_plot_moves_below_the_axis_title_with_its_own_margin():
    figure = go.Figure(go.Scatter(x=[1, 2], y=[1, 2]))
    figure.update_layout(height=500, margin=dict(b=110), xaxis_title="d")
    figure.add_annotation(text=LONG + "<br>" + LONG, xref="paper", yref="paper", x=0, y=0,
                          yshift=-100, yanchor="bottom", showarrow=False)
    note = theme.themed(figure, presenter=True).layout
    annotation = note.annotations[0]
    assert annotation.yanchor == "top" and annotation.yshift <= -style.PRESENTER_NOTE_CLEARANCE_PX
    lines = annotation.text.count("<br>") + 1
    assert note.margin.b >= style.PRESENTER_NOTE_CLEARANCE_PX + lines * annotation.font.size
    assert note.height >= note.margin.b + (note.margin.t or 0) or \
        note.height == style.PRESENTER_SCREEN_FIGURE_PX
    assert note.height <= style.PRESENTER_SCREEN_FIGURE_PX


def test_a_colour_bar_title_stands_beside_the_bar():
    figure = go.Figure(go.Heatmap(z=[[0, 1], [1, 0]], colorbar=dict(title=dict(text="weight"))))
    assert theme.themed(figure, presenter=True).data[0].colorbar.title.side == "right"


def test_an_untitled_figures_subplot_titles_wrap_and_its_top_margin_holds_them():
    figure = make_subplots(rows=2, cols=1, subplot_titles=[LONG, "second"])
    for row in (1, 2):
        figure.add_trace(go.Bar(x=[1, 2], y=[1, 2]), row=row, col=1)
    figure.update_layout(height=400, margin=dict(t=40))
    shown = theme.themed(figure, presenter=True).layout
    top = shown.annotations[0].text
    assert top.replace("<br>", " ") == LONG and top.count("<br>") >= 1
    assert all(len(line) <= style.PRESENTER_SUBPLOT_TITLE_CHARS for line in top.split("<br>"))
    assert shown.margin.t >= (top.count("<br>") + 1) * style.PRESENTER_FONT_PX * \
        style.PRESENTER_LINE_FACTOR
    assert shown.height == 400 + shown.margin.t - 40  # the room is added, not taken from the plot
