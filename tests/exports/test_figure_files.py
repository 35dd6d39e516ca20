"""The figure files of viz/export_figures.py, opened by the tools a reader would use.

- HTML opens in Chromium with every network request blocked and draws: no console error, the
  plot's SVG is there, the title names the view, layer, head and tokens, plotly.js is inlined
  once however many figures the page holds. bertviz's head view page likewise draws its SVG.
- SVG is well-formed XML whose text holds the tokens; bertviz's head view as SVG too.
- PDF has the structure of a PDF (header, cross-reference, end marker, pages), embeds its fonts,
  and its text, decoded through the fonts' own ToUnicode maps, holds the tokens.
- PNG's pixel size follows the scale.

The records are made up (random rows that sum to one, words chosen to be recognisable): the
files are about drawing, not about a model.
"""

from __future__ import annotations

import re
import struct
import xml.etree.ElementTree as ElementTree
import zlib

import numpy as np
import pytest

from models.hooks.record import AttentionRecord
from viz.bertviz_views import head_view_html
from viz.export_figures import (ExportError, bertviz_svg, figure_image, figures_html,
                                title_for, titled_page)
from viz.heatmap import attention_heatmap
from viz.rollout import rollout_figures

TOKENS = ("[CLS]", "zebra", "quietly", "grazed", "meadows", "[SEP]")
OTHER_TOKENS = ("[CLS]", "pilot", "landed", "[SEP]")
SVG_NS = "{http://www.w3.org/2000/svg}"
PLOTLY_BANNER = "plotly.js v"  # the first line of the inlined library, once per copy


def made_up_record(tokens=TOKENS, layers: int = 2, heads: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(layers, heads, len(tokens), len(tokens)))
    weights = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    return AttentionRecord(tokens, weights=weights, source="made-up model")


@pytest.fixture(scope="module")
def record():
    return made_up_record()



def open_offline(browser, page_html: str):
    """The page opened with every request aborted; returns (page, blocked urls, errors)."""
    page = browser.new_page()
    blocked, errors = [], []
    page.route("**/*", lambda route: (blocked.append(route.request.url), route.abort()))
    page.on("console", lambda message: errors.append(message.text)
            if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_content(page_html, wait_until="load")
    return page, blocked, errors


def test_html_of_two_figures_draws_offline_with_plotly_inlined_once(browser, record):
    raw = record.layers[1].mean(0)
    figures = [attention_heatmap(record, 1, 2), *rollout_figures(raw, raw, record.tokens, 1)]
    title = title_for("Attention map", record.tokens, 1, 2)
    page_html = figures_html(figures, title)
    assert page_html.count(PLOTLY_BANNER) == 1
    assert "cdn" not in page_html.lower().split(PLOTLY_BANNER)[0]  # nothing loaded before it
    page, blocked, errors = open_offline(browser, page_html)
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=30_000)
    assert page.locator(".js-plotly-plot").count() == 3
    assert page.title() == title
    assert "layer 1" in title and "head 2" in title and "zebra quietly grazed" in title
    drawn_labels = " ".join(page.locator(".js-plotly-plot .xtick text").all_text_contents())
    assert "meadows" in drawn_labels
    assert blocked == [] and errors == []
    page.close()


def test_bertviz_head_view_page_draws_offline_with_its_title(browser, record):
    page_html = titled_page(head_view_html(record), title_for("bertviz head_view", TOKENS))
    page, blocked, errors = open_offline(browser, page_html)
    page.wait_for_selector("#vis svg text", timeout=30_000)
    drawn = page.locator("#vis svg text").all_text_contents()
    assert {"zebra", "meadows"} <= set(drawn)
    assert page.title().startswith("bertviz head_view") and "grazed" in page.title()
    assert blocked == [] and errors == []
    page.close()


def svg_texts(data: bytes) -> list[str]:
    root = ElementTree.fromstring(data)  # raises on anything but well-formed XML
    assert root.tag == f"{SVG_NS}svg"
    return ["".join(element.itertext()) for element in root.iter(f"{SVG_NS}text")]


def test_svg_of_a_heatmap_is_xml_holding_the_tokens(record):
    texts = svg_texts(figure_image(attention_heatmap(record, 0, 1), "svg"))
    joined = " ".join(texts)
    for token in TOKENS[1:-1]:
        assert token in joined
    assert "Layer 0 · Head 1" in joined


def test_svg_of_bertviz_head_view_is_the_drawn_view(record):
    data = bertviz_svg(head_view_html(record))
    root = ElementTree.fromstring(data)
    assert float(root.get("width")) > 100 and float(root.get("height")) > 50
    texts = svg_texts(data)
    # the tokens on both sides, and the head numbers drawn on the colour squares
    assert texts.count("zebra") == 2 and texts.count("meadows") == 2
    assert {"0", "1", "2"} <= set(texts)
    lines = root.findall(f".//{SVG_NS}line") + root.findall(f".//{SVG_NS}path")
    assert lines  # the attention lines bertviz drew


def unicode_maps(data: bytes) -> tuple[int, dict[bytes, str]]:
    """(number of ToUnicode maps, code -> text) from the PDF's decompressed streams."""
    mapping: dict[bytes, str] = {}
    count = 0
    for stream in re.findall(rb"stream\r?\n(.*?)\r?\nendstream", data, re.S):
        try:
            text = zlib.decompress(stream)
        except zlib.error:
            continue
        if b"begincmap" not in text:
            continue
        count += 1
        for block in re.findall(rb"beginbfchar(.*?)endbfchar", text, re.S):
            for code, target in re.findall(rb"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>", block):
                mapping[bytes.fromhex(code.decode())] = bytes.fromhex(
                    target.decode()).decode("utf-16-be")
        for block in re.findall(rb"beginbfrange(.*?)endbfrange", text, re.S):
            for first, last, target in re.findall(
                    rb"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>", block):
                width = len(first) // 2
                start, end, base = int(first, 16), int(last, 16), int(target, 16)
                for offset in range(end - start + 1):
                    mapping[(start + offset).to_bytes(width, "big")] = chr(base + offset)
    return count, mapping


def pdf_text(data: bytes) -> str:
    """The PDF's shown strings (hex strings of Tj and TJ), decoded through its one font's map."""
    count, mapping = unicode_maps(data)
    assert count == 1, "one embedded font expected (decoding here does not track Tf)"
    shown = []
    for stream in re.findall(rb"stream\r?\n(.*?)\r?\nendstream", data, re.S):
        try:
            text = zlib.decompress(stream)
        except zlib.error:
            continue
        for operands in re.findall(rb"\[([^\]]*)\]\s*TJ|(<[0-9A-Fa-f]+>)\s*Tj", text):
            for hexes in re.findall(rb"<([0-9A-Fa-f]+)>", b"".join(operands)):
                raw = bytes.fromhex(hexes.decode())
                shown.append("".join(mapping.get(raw[i:i + 2], "\ufffd")
                                     for i in range(0, len(raw), 2)))
            shown.append(" ")
    return "".join(shown)


def test_pdf_of_a_heatmap_is_a_pdf_whose_text_holds_the_tokens(record):
    data = figure_image(attention_heatmap(record, 0, 1), "pdf")
    assert data.startswith(b"%PDF-1.") and data.rstrip().endswith(b"%%EOF")
    assert b"startxref" in data and re.search(rb"/Type\s*/Page\b", data)
    assert b"/FontFile2" in data  # the font is embedded, so the text reads the same anywhere
    text = pdf_text(data)
    for token in TOKENS[1:-1]:
        assert token in text
    # the decoding is of this figure's text, not of every glyph the font has
    other = pdf_text(figure_image(attention_heatmap(made_up_record(OTHER_TOKENS), 0, 0), "pdf"))
    assert "pilot" in other and "zebra" not in other


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_png_scale_multiplies_its_pixels(record):
    figure = attention_heatmap(record, 0, 0)
    width, height = png_size(figure_image(figure, "png", scale=1))
    double = png_size(figure_image(figure, "png", scale=2))
    assert (width, height) == (figure.layout.width, figure.layout.height)
    assert double == (2 * width, 2 * height)


def test_wrong_image_requests_are_one_sentence(record):
    figure = attention_heatmap(record, 0, 0)
    with pytest.raises(ExportError, match="scale must be between"):
        figure_image(figure, "png", scale=0)
    with pytest.raises(ExportError, match="not an image format"):
        figure_image(figure, "gif")
