"""Figure text that Streamlit's Plotly theme would draw in its light grey gets a colour with WCAG AA
contrast; colours a figure or presenter mode chose stay (viz.theme.readable_text)."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tests.viz.test_presenter import wcag_contrast
from viz.style import FIGURE_TEXT_COLOR, PRESENTER_TEXT_COLOR
from viz.theme import readable_text, themed

STREAMLIT_PLOTLY_GREY = "#808495"  # the colour Streamlit's Plotly theme gives axis text


def test_the_colour_passes_aa_where_streamlits_grey_does_not():
    assert wcag_contrast(FIGURE_TEXT_COLOR, "#ffffff") >= 4.5
    assert wcag_contrast(STREAMLIT_PLOTLY_GREY, "#ffffff") < 4.5


def test_uncoloured_text_gets_the_colour_and_chosen_colours_stay():
    figure = make_subplots(rows=1, cols=2, subplot_titles=["left", "right"])
    figure.add_trace(go.Heatmap(z=[[0.1, 0.9]], colorbar=dict(title=dict(text="weight"))), 1, 1)
    figure.add_trace(go.Scatter(y=[1, 2], name="line"), 1, 2)
    figure.update_layout(xaxis2=dict(tickfont=dict(color="#d62728")))
    figure.add_annotation(text="note", x=0, y=0, font=dict(color="#000000"))
    result = readable_text(figure)
    layout = result.layout
    assert layout.font.color == FIGURE_TEXT_COLOR
    assert layout.legend.font.color == FIGURE_TEXT_COLOR
    for name in ("xaxis", "yaxis", "yaxis2"):
        assert layout[name].tickfont.color == FIGURE_TEXT_COLOR
        assert layout[name].title.font.color == FIGURE_TEXT_COLOR
    assert layout.xaxis2.tickfont.color == "#d62728"
    assert result.data[0].colorbar.tickfont.color == FIGURE_TEXT_COLOR
    assert result.data[0].colorbar.title.font.color == FIGURE_TEXT_COLOR
    assert [a.font.color for a in layout.annotations] == [FIGURE_TEXT_COLOR] * 2 + ["#000000"]
    assert figure.layout.font.color is None  # the figure given is left as it was
    assert figure.layout.xaxis.tickfont.color is None


def test_presenter_modes_dark_text_is_kept():
    figure = go.Figure(go.Bar(x=["a", "b"], y=[1, 2]), layout=dict(title=dict(text="t")))
    result = readable_text(themed(figure, presenter=True))
    assert result.layout.xaxis.tickfont.color == PRESENTER_TEXT_COLOR
    assert result.layout.font.color == PRESENTER_TEXT_COLOR


def test_a_colour_bars_title_runs_beside_it_unless_a_side_was_chosen():
    """On top (Plotly's default) a colour bar's title met its top tick label ("weight" over "1"
    on every heatmap of the light theme)."""
    figure = go.Figure([go.Heatmap(z=[[0.1]], colorbar=dict(title=dict(text="weight"))),
                        go.Heatmap(z=[[0.2]], colorbar=dict(title=dict(text="layer", side="top"))),
                        go.Heatmap(z=[[0.3]])])
    result = readable_text(figure)
    assert [trace.colorbar.title.side for trace in result.data] == ["right", "top", None]
    assert figure.data[0].colorbar.title.side is None  # the figure given is left as it was
