"""A figure's text alternative: its title and what it shows, in words, for screen readers (the
chart wrapper gives it to the figure as its accessible name)."""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import plotly.graph_objects as go

MAX_DESCRIBED_TRACES = 4  # more traces than this are counted by kind, not described one by one
MAX_NAMED_SUBPLOTS = 6  # subplot titles named when a figure has no title of its own
DESCRIBED_DIGITS = 3  # significant digits of the numbers a description reads out
UNTITLED = "Figure"

_KIND_NAMES = {"heatmap": "heatmap", "bar": "bar chart", "scatter": "line chart",
               "scattergl": "line chart", "histogram": "histogram", "box": "box plot",
               "violin": "violin plot", "contour": "contour map", "pie": "pie chart",
               "table": "table"}


def plain_text(text) -> str:
    """Plotly's HTML-ish label text as plain words: tags become spaces, entities are read."""
    if text is None:
        return ""
    words = re.sub(r"<[^>]*>", " ", str(text))
    words = words.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    return re.sub(r"\s+", " ", words).strip()


def figure_title(figure: go.Figure) -> str:
    """The figure's title, else its subplots' titles joined, else "Figure"."""
    title = plain_text(figure.layout.title.text)
    if title:
        return title
    annotations = [plain_text(a.text) for a in figure.layout.annotations
                   if a.xref == "paper" and a.yref == "paper" and plain_text(a.text)]
    if annotations:
        named = "; ".join(annotations[:MAX_NAMED_SUBPLOTS])
        more = len(annotations) - MAX_NAMED_SUBPLOTS
        return named + (f"; and {more} more" if more > 0 else "")
    return UNTITLED


def describe(figure: go.Figure) -> str:
    """The figure's text alternative: "<title>. <what each trace shows>." A figure of many
    traces (a mosaic of heads) is summed up by kind and value range."""
    title = figure_title(figure)
    traces = [trace for trace in figure.data if trace.visible in (None, True)]
    if not traces:
        return f"{title}. An empty figure."
    if len(traces) > MAX_DESCRIBED_TRACES:
        parts = [_counted(kind, count) for kind, count in Counter(_kind(t) for t in traces).items()]
        values = _finite(np.concatenate([_values(t).ravel() for t in traces]))
        spread = f", values {_span(values)}" if values.size else ""
        return f"{title}. {_sentence(_joined(parts) + spread)}"
    return f"{title}. " + " ".join(_sentence(_trace_text(figure, t)) for t in traces)


def _kind(trace) -> str:
    if trace.type in ("scatter", "scattergl") and trace.mode is not None \
            and "lines" not in trace.mode:
        return "scatter plot"
    return _KIND_NAMES.get(trace.type, f"{trace.type} chart")


def _counted(kind: str, count: int) -> str:
    return f"a {kind}" if count == 1 else f"{count} {kind}s"


def _joined(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


def _many(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _span(values: np.ndarray) -> str:
    """ "from <least> to <largest>", or "at <value>" when they are equal."""
    low, high = _number(values.min()), _number(values.max())
    return f"at {low}" if low == high else f"from {low} to {high}"


def _number(value: float) -> str:
    return f"{value:.{DESCRIBED_DIGITS}g}"


def _finite(values: np.ndarray) -> np.ndarray:
    return values[np.isfinite(values)]


def _as_floats(values) -> np.ndarray:
    """Numbers of a trace's array as floats; None and text that is not a number become NaN."""
    if values is None:
        return np.array([], dtype=float)
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        pass
    array = np.asarray(values, dtype=object)
    flat = [_float(v) for v in array.ravel()]
    return np.array(flat, dtype=float).reshape(array.shape)


def _float(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _values(trace) -> np.ndarray:
    """The numbers a trace shows: z for maps, the value axis for bars, y for lines."""
    if "z" in trace and trace.z is not None:
        return _as_floats(trace.z)
    if trace.type == "bar" and trace.orientation == "h":
        return _as_floats(trace.x)
    if "y" in trace:
        return _as_floats(trace.y)
    return np.array([], dtype=float)


def _axis(figure: go.Figure, trace, letter: str):
    anchor = getattr(trace, f"{letter}axis", None) or letter
    return figure.layout[f"{letter}axis{anchor[1:]}"]


def _axis_title(figure: go.Figure, trace, letter: str) -> str:
    return plain_text(_axis(figure, trace, letter).title.text)


def _labels(figure: go.Figure, trace, letter: str, count: int) -> list[str]:
    """The labels along one axis of a trace, quoted: its own x / y, else the axis's tick text,
    else positions 0, 1, ... (unquoted)."""
    own = getattr(trace, letter, None)
    if own is not None and len(own) == count:
        return [f"'{plain_text(v)}'" for v in own]
    axis = _axis(figure, trace, letter)
    if axis.ticktext is not None and axis.tickvals is not None and len(axis.ticktext) == count:
        return [f"'{plain_text(v)}'" for v in axis.ticktext]
    return [str(i) for i in range(count)]


def _named(kind: str, trace) -> str:
    name = plain_text(trace.name)
    return f"a {kind} of {name}" if name else f"a {kind}"


def _trace_text(figure: go.Figure, trace) -> str:
    kind = _kind(trace)
    values = _values(trace)
    if trace.type in ("heatmap", "contour") and values.ndim == 2 and values.size:
        return _map_text(figure, trace, kind, values)
    if trace.type == "bar" and values.ndim == 1 and values.size:
        return _bar_text(figure, trace, kind, values)
    if trace.type in ("scatter", "scattergl") and values.ndim == 1 and values.size:
        return _line_text(figure, trace, kind, values)
    return _named(kind, trace)


def _map_text(figure: go.Figure, trace, kind: str, values: np.ndarray) -> str:
    rows, columns = values.shape
    row_title, column_title = _axis_title(figure, trace, "y"), _axis_title(figure, trace, "x")
    text = (f"{_named(kind, trace)} of {_many(rows, 'row')}"
            + (f" ({row_title})" if row_title else "")
            + f" by {_many(columns, 'column')}" + (f" ({column_title})" if column_title else ""))
    finite = _finite(values)
    if not finite.size:
        return text
    row, column = np.unravel_index(np.nanargmax(np.where(np.isfinite(values), values, -np.inf)),
                                   values.shape)
    row_label = _labels(figure, trace, "y", rows)[row]
    column_label = _labels(figure, trace, "x", columns)[column]
    return (f"{text}, values {_span(finite)}; the largest "
            f"is at row {row_label}, column {column_label}")


def _bar_text(figure: go.Figure, trace, kind: str, values: np.ndarray) -> str:
    category = "y" if trace.orientation == "h" else "x"
    labels = _labels(figure, trace, category, values.size)
    title = _axis_title(figure, trace, category)
    text = f"{_named(kind, trace)} of {_many(values.size, 'bar')}" + (f" ({title})" if title else "")
    finite = _finite(values)
    if not finite.size:
        return text
    largest = int(np.nanargmax(np.where(np.isfinite(values), values, -np.inf)))
    return f"{text}; the largest is {labels[largest]} at {_number(values[largest])}"


def _line_text(figure: go.Figure, trace, kind: str, values: np.ndarray) -> str:
    along = _axis_title(figure, trace, "x")
    text = f"{_named(kind, trace)} of {_many(values.size, 'point')}" \
        + (f" over {along}" if along else "")
    finite = _finite(values)
    if not finite.size:
        return text
    return f"{text}, {_span(finite)}"
