"""Colour arithmetic for figures: WCAG contrast, and the colour-blind-safe palette (a
sequential and a diverging scale, Okabe and Ito's categorical colours) given to a figure."""

from __future__ import annotations

import re

import plotly.graph_objects as go

from viz.style import GREY_CHROMA, OKABE_ITO, SAFE_DIVERGING, SAFE_SEQUENTIAL


def relative_luminance(colour: str) -> float:
    """WCAG 2 relative luminance of a CSS colour (#rgb, #rrggbb, rgb(), rgba())."""
    channels = [value / 255 for value in _rgb(colour)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast_ratio(first: str, second: str) -> float:
    """WCAG 2 contrast ratio (1 to 21) between two colours."""
    lighter, darker = sorted((relative_luminance(first), relative_luminance(second)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def contrast_on_white(colour: str) -> float:
    try:
        return contrast_ratio(colour, "#ffffff")
    except ValueError:
        return 1.0


def _rgb(colour: str) -> tuple[float, float, float]:
    return _rgba(colour)[:3]


def _rgba(colour: str) -> tuple[float, float, float, float]:
    text = str(colour).strip().lower()
    if text.startswith("#") and len(text) in (4, 7):
        digits = text[1:]
        if len(digits) == 3:
            digits = "".join(c * 2 for c in digits)
        return (int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16), 1.0)
    match = re.fullmatch(r"rgba?\(([^)]*)\)", text)
    if match:
        parts = [float(p) for p in match.group(1).split(",")]
        if len(parts) in (3, 4):
            return (parts[0], parts[1], parts[2], parts[3] if len(parts) == 4 else 1.0)
    named = {"white": (255, 255, 255), "black": (0, 0, 0), "grey": (128, 128, 128),
             "gray": (128, 128, 128)}
    if text in named:
        return (*named[text], 1.0)
    raise ValueError(f"Not a colour this module reads: {colour!r}")


def _is_grey(colour: str) -> bool:
    red, green, blue = _rgb(colour)
    return (max(red, green, blue) - min(red, green, blue)) / 255 < GREY_CHROMA


def _scale_colours(scale) -> list[str]:
    return [entry[1] for entry in scale]


def _safe_scale(scale):
    """The colour-blind-safe counterpart of a colour scale (same light-to-dark direction), or
    the scale itself when it is made of greys."""
    if scale is None:
        return None
    try:
        colours = _scale_colours(scale)
        if all(_is_grey(c) for c in colours):
            return scale
        lightness = [relative_luminance(c) for c in colours]
    except (ValueError, TypeError, IndexError):
        return scale
    ends = (lightness[0], lightness[-1])
    if max(lightness[1:-1], default=-1.0) > max(ends) + 0.05:  # light middle: diverging
        return SAFE_DIVERGING
    return SAFE_SEQUENTIAL if lightness[0] < lightness[-1] else SAFE_SEQUENTIAL + "_r"


class _Categorical:
    """Maps each distinct non-grey colour of a figure, in order of first use, to Okabe-Ito."""

    def __init__(self) -> None:
        self.assigned: dict[tuple[float, float, float], str] = {}

    def __call__(self, colour):
        if colour is None or not isinstance(colour, str):
            return colour
        try:
            red, green, blue, alpha = _rgba(colour)
        except ValueError:
            return colour
        if _is_grey(colour):
            return colour
        key = (red, green, blue)
        if key not in self.assigned:
            self.assigned[key] = OKABE_ITO[len(self.assigned) % len(OKABE_ITO)]
        new = self.assigned[key]
        if alpha >= 1.0:
            return new
        r, g, b = _rgb(new)
        return f"rgba({r:g}, {g:g}, {b:g}, {alpha:g})"

    def many(self, colours):
        if isinstance(colours, str) or colours is None:
            return self(colours)
        values = list(colours)
        if not all(isinstance(c, str) for c in values):
            return colours  # numbers on a colour scale
        return [self(c) for c in values]


def safe_colours(figure: go.Figure) -> None:
    layout = figure.layout
    layout.colorway = OKABE_ITO
    for name in layout:
        if re.fullmatch(r"coloraxis\d*", name) and layout[name].colorscale is not None:
            layout[name].colorscale = _safe_scale(layout[name].colorscale)
    recolour = _Categorical()
    for trace in figure.data:
        if "colorscale" in trace and trace.colorscale is not None:
            trace.colorscale = _safe_scale(trace.colorscale)
        if "marker" in trace:
            marker = trace.marker
            if "colorscale" in marker and marker.colorscale is not None:
                marker.colorscale = _safe_scale(marker.colorscale)
            if "color" in marker and marker.color is not None:
                marker.color = recolour.many(marker.color)
            if "line" in marker and marker.line.color is not None:
                marker.line.color = recolour.many(marker.line.color)
        if "line" in trace and trace.line.color is not None:
            trace.line.color = recolour(trace.line.color)
        if "fillcolor" in trace and trace.fillcolor is not None:
            trace.fillcolor = recolour(trace.fillcolor)
    for shape in layout.shapes:
        shape.line.color = recolour(shape.line.color)
        shape.fillcolor = recolour(shape.fillcolor)
