"""bertviz's views as offline HTML: the page's text, then the page drawn in headless Chromium."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from importlib.metadata import distribution

import numpy as np
import pytest

from models.hooks.record import AttentionRecord
from tests.browser_support import guard_requests
from viz import bertviz_views as bv

HOSTILE = "</script><script>alert(1)</script>"
IMAGE = "<img src=x onerror=alert(2)>"
PAIR_TOKENS = ("[CLS]", "time", HOSTILE, "&amp;", "[SEP]", IMAGE, '"q"\\', "[SEP]")
PAIR_SEGMENTS = (0, 0, 0, 0, 0, 1, 1, 1)
B_START = 5
LAYERS, HEADS = 2, 3


def make_record(tokens=PAIR_TOKENS, segments=PAIR_SEGMENTS, layers=LAYERS, heads=HEADS, seed=0):
    rng = np.random.default_rng(seed)
    weights = rng.random((layers, heads, len(tokens), len(tokens))) ** 4  # (L, H, Q, K)
    weights /= weights.sum(axis=-1, keepdims=True)
    return AttentionRecord(tuple(tokens), weights.astype(np.float32), "hand-built",
                           segment_ids=tuple(segments), special_positions=(0,))


def single_record(count=6, **kwargs):
    tokens = ("[CLS]",) + tuple(f"w{i}" for i in range(count - 2)) + ("[SEP]",)
    return make_record(tokens, (), **kwargs)


def params_of(html: str) -> dict:
    """The data object bertviz's script reads (written once, as a JS object literal = JSON)."""
    match = re.search(r"const params = (\{.*?\}); // HACK", html)
    assert match, "bertviz's params line not found"
    return json.loads(match.group(1))


class _TagCollector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)


def start_tags(html: str) -> list[str]:
    collector = _TagCollector()
    collector.feed(html)
    return collector.tags


def library_text(dist_name: str, relative_path: str) -> str:
    return open(distribution(dist_name).locate_file(relative_path), encoding="utf-8").read()


@pytest.fixture(scope="module")
def pair_record():
    return make_record()


@pytest.fixture(scope="module", params=bv.VIEWS)
def pair_html(request, pair_record):
    return bv.view_html(pair_record, request.param)


# --- the HTML text ----------------------------------------------------------------------------

def test_nothing_is_loaded_from_outside(pair_html):
    tags = re.findall(r"<(?:script|link|img|iframe|source|embed)\b[^>]*>", pair_html, re.I)
    assert tags and all(not re.search(r"\b(?:src|href)\s*=", tag, re.I) for tag in tags), tags
    assert "cdnjs" not in pair_html
    assert "require.min.js" not in pair_html
    assert "require.config" not in pair_html
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", pair_html, re.I)


def test_d3_and_jquery_are_inlined_from_their_packages(pair_html):
    d3 = library_text(*bv.D3_FILE)
    jquery = library_text(*bv.JQUERY_FILE)
    assert d3.startswith("// https://d3js.org v5.7.0")
    assert "jQuery v3.7.1" in jquery
    assert f"<script>{d3}</script>" in pair_html
    assert f"<script>{jquery}</script>" in pair_html
    assert pair_html.index(d3) < pair_html.index("window.require = window.requirejs")
    assert pair_html.index("window.require") < pair_html.index("requirejs(['jquery', 'd3']")


def test_typed_tokens_cannot_leave_the_script(pair_html):
    assert HOSTILE not in pair_html and IMAGE not in pair_html
    # An HTML parser sees five scripts (d3, jQuery, the loader, bertviz's view, ours after it)
    # and no other tag but bertviz's own; "<!--" inside a script would change how "</script" is
    # read.
    assert start_tags(pair_html).count("script") == 5
    assert set(start_tags(pair_html)) == {"html", "head", "meta", "title", "style", "script",
                                          "body", "div", "span", "select", "option"}
    assert len(re.findall(r"</script", pair_html, re.I)) == 5
    assert "<!--" not in pair_html
    assert "\\u003c/script\\u003e\\u003cscript\\u003ealert(1)" in pair_html
    assert params_of(pair_html)["attention"][0]["left_text"] == list(PAIR_TOKENS)


def test_pair_gets_bertviz_filter_with_each_block(pair_html, pair_record):
    entries = params_of(pair_html)["attention"]
    assert [e["name"] for e in entries] == [
        "All", "Sentence A -> Sentence A", "Sentence B -> Sentence B",
        "Sentence A -> Sentence B", "Sentence B -> Sentence A"]
    assert '<select id="filter">' in pair_html
    a_to_b = entries[3]
    assert a_to_b["left_text"] == list(PAIR_TOKENS[:B_START])
    assert a_to_b["right_text"] == list(PAIR_TOKENS[B_START:])
    expected = np.round(pair_record.weights[:, :, :B_START, B_START:].astype(np.float64), 3)
    np.testing.assert_allclose(np.array(a_to_b["attn"]), expected, atol=1e-9)


def test_weights_are_rounded_and_written_once():
    record = single_record(5)
    html = bv.head_view_html(record)
    entries = params_of(html)["attention"]
    assert len(entries) == 1 and '<select id="filter">' not in html
    assert html.count('"left_text"') == 1  # bertviz itself writes the data a second time
    attn = np.array(entries[0]["attn"])
    np.testing.assert_array_equal(attn, np.round(record.weights.astype(np.float64), 3))
    numbers = re.findall(r"\d\.\d+", json.dumps(entries[0]["attn"]))
    assert numbers and max(len(n) for n in numbers) <= 5  # "0.123"


def test_model_view_is_light_and_head_view_has_layer_menu():
    record = single_record(4)
    assert '"display_mode": "light"' in bv.model_view_html(record)
    assert '<select id="layer">' in bv.head_view_html(record)
    with pytest.raises(ValueError, match="unknown bertviz view"):
        bv.view_html(record, "neuron")


def test_sentence_b_start_only_for_one_block_then_the_other():
    assert bv.sentence_b_start(make_record()) == B_START
    assert bv.sentence_b_start(single_record(5)) is None
    interleaved = make_record(segments=(0, 1, 0, 0, 0, 1, 1, 1))
    assert bv.sentence_b_start(interleaved) is None


def test_limits_follow_the_number_of_lines_drawn():
    minilm_like = single_record(4, layers=6, heads=12)
    assert bv.max_tokens(minilm_like, bv.HEAD_VIEW) == 111  # 12 x 111^2 <= 150,000 lines
    assert bv.max_tokens(minilm_like, bv.MODEL_VIEW) == 45  # 72 x 45^2 <= 150,000 lines
    bert_base = single_record(4, layers=12, heads=12)
    assert bv.max_tokens(bert_base, bv.MODEL_VIEW) == 32
    bert_large_pair = make_record(layers=24, heads=16)
    assert bv.max_tokens(bert_large_pair, bv.HEAD_VIEW) == 57  # pairs send the data twice
    scratch_like = single_record(4, layers=4, heads=4)
    assert bv.max_tokens(scratch_like, bv.HEAD_VIEW) == bv.MAX_TOKENS == 128
    assert bv.max_tokens(scratch_like, bv.MODEL_VIEW) == 96
    assert bv.fits(single_record(45, layers=6, heads=12), bv.MODEL_VIEW)
    assert not bv.fits(single_record(46, layers=6, heads=12), bv.MODEL_VIEW)


def test_blank_tokens_stay_visible_and_html_bytes_counts_utf8():
    record = make_record(("[CLS]", "", " ", "é", "[SEP]"), ())
    assert params_of(bv.head_view_html(record))["attention"][0]["left_text"] == \
        ["[CLS]", "␣", "␣", "é", "[SEP]"]
    assert bv.html_bytes("é<") == 3


# --- drawn in headless Chromium, every outside request aborted --------------------------------


def open_page(browser, html):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    outside = guard_requests(page)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_content(html)
    return page, outside, dialogs, errors


def texts(page, selector):
    return page.locator(selector).evaluate_all("nodes => nodes.map(n => n.textContent)")


def test_head_view_draws_offline_with_tokens_as_text(browser, pair_record):
    page, outside, dialogs, errors = open_page(browser, bv.head_view_html(pair_record))
    try:
        count = pair_record.num_tokens
        page.locator("#vis svg #attention line").nth(HEADS * count * count - 1).wait_for(
            state="attached", timeout=30_000)
        assert texts(page, "#vis svg #left text") == list(PAIR_TOKENS)
        assert texts(page, "#vis svg #right text") == list(PAIR_TOKENS)
        assert page.locator("#vis svg #attention line").count() == HEADS * count * count
        assert page.evaluate("d3.version") == "5.7.0"
        page.select_option("#filter", "3")  # Sentence A -> Sentence B
        assert texts(page, "#vis svg #left text") == list(PAIR_TOKENS[:B_START])
        assert texts(page, "#vis svg #right text") == list(PAIR_TOKENS[B_START:])
        page.select_option("#layer", "1")
        assert page.locator("#vis svg #attention line").count() == \
            HEADS * B_START * (count - B_START)
        assert outside == [] and dialogs == [] and errors == []
    finally:
        page.close()


def test_model_view_draws_every_head_offline(browser, pair_record):
    page, outside, dialogs, errors = open_page(browser, bv.model_view_html(pair_record))
    try:
        count = pair_record.num_tokens
        thumbnails = page.locator("#vis svg .attn_background")
        thumbnails.nth(LAYERS * HEADS - 1).wait_for(state="attached", timeout=30_000)
        assert thumbnails.count() == LAYERS * HEADS
        assert page.locator("#vis svg line").count() == LAYERS * HEADS * count * count
        box = thumbnails.first.bounding_box()
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        assert texts(page, "#vis svg text.token") == list(PAIR_TOKENS) * 2
        assert outside == [] and dialogs == [] and errors == []
    finally:
        page.close()
