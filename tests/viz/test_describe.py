"""A figure's text alternative names its title and reads out what it shows (viz.describe)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tests.viz.test_presenter import make_record
from viz.describe import MAX_DESCRIBED_TRACES, describe, figure_title, plain_text
from viz.heatmap import attention_heatmap


def test_a_heatmap_is_read_out_with_its_size_axes_range_and_brightest_cell():
    tokens = ["[CLS]", "time", "flies", "[SEP]"]
    record = make_record(tokens)
    figure = attention_heatmap(record, 1, 2)
    weights = record.weights[1, 2]
    text = describe(figure)
    row, column = np.unravel_index(np.argmax(weights), weights.shape)
    assert text.startswith(plain_text(figure.layout.title.text) + ". ")
    assert "4 rows (query) by 4 columns (key)" in text
    assert f"from {weights.min():.3g} to {weights.max():.3g}" in text
    assert f"row '{figure.data[0].y[row]}', column '{figure.data[0].x[column]}'" in text
    assert tokens[row] in text and tokens[column] in text


def test_bars_name_their_largest_and_lines_their_range():
    figure = go.Figure([go.Bar(x=["cat", "dog", "fish"], y=[0.2, 0.7, 0.1], name="probability"),
                        go.Scatter(x=[0, 1, 2], y=[3.0, -1.0, 2.5], mode="lines", name="loss")],
                       layout=dict(title=dict(text="Next <b>word</b>"),
                                   xaxis=dict(title=dict(text="candidate"))))
    text = describe(figure)
    assert text == ("Next word. A bar chart of probability of 3 bars (candidate); the largest is "
                    "'dog' at 0.7. A line chart of loss of 3 points over candidate, from -1 to 3.")


def test_horizontal_bars_read_their_labels_from_the_y_axis():
    figure = go.Figure(go.Bar(y=["a", "b"], x=[1.0, 5.0], orientation="h"))
    assert "the largest is 'b' at 5" in describe(figure)


def test_an_untitled_figure_uses_its_subplot_titles_and_many_traces_are_counted():
    count = MAX_DESCRIBED_TRACES + 2
    figure = make_subplots(rows=1, cols=count, subplot_titles=[f"Head {h}" for h in range(count)])
    rng = np.random.default_rng(0)
    maps = [rng.random((3, 3)) for _ in range(count)]
    for head, values in enumerate(maps):
        figure.add_trace(go.Heatmap(z=values), row=1, col=head + 1)
    text = describe(figure)
    assert figure_title(figure).startswith("Head 0; Head 1; ")
    assert f"{count} heatmaps" in text
    low, high = min(m.min() for m in maps), max(m.max() for m in maps)
    assert f"values from {low:.3g} to {high:.3g}" in text


def test_masked_cells_and_hidden_traces_are_left_out_and_an_empty_figure_says_so():
    figure = go.Figure([go.Heatmap(z=[[None, 0.25], [0.5, np.nan]], x=["a", "b"], y=["c", "d"]),
                        go.Scatter(y=[100.0], visible="legendonly")],
                       layout=dict(title=dict(text="Masked")))
    text = describe(figure)
    assert "values from 0.25 to 0.5; the largest is at row 'd', column 'a'" in text
    assert "100" not in text
    assert describe(go.Figure()) == "Figure. An empty figure."
