"""Issue 14, section 5, in the served app in headless Chromium: a real click on an all-heads tile
opens that head, and bertviz's views fit their frame, number their head colours and do what the
page says a click and a double-click do."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import expect

from tests.app_support import GUARD_MESSAGE
from tests.browser_support import wait_idle

HEADS = 12  # the default MiniLM: 6 layers x 12 heads
HEAD_VIEW_FRAME = "iframe[title='bertviz head view of the attention']"
MODEL_VIEW_FRAME = "iframe[title='bertviz model view of the attention']"


@pytest.fixture
def page(shared_tab):
    """The test process's shared tab (tests/conftest.py) at the walkthrough's 1400 x 1100."""
    shared_tab.set_viewport_size({"width": 1400, "height": 1100})
    return shared_tab


def open_page(page, url: str, heading: str) -> None:
    page.goto(url)
    page.get_by_role("heading", name=heading).first.wait_for(timeout=90_000)
    wait_idle(page)


def assert_clean(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0
    alerts = page.locator('[data-testid="stAlert"]').all_text_contents()
    assert not [text for text in alerts if GUARD_MESSAGE in text], alerts
    assert page.outside_requests == []


# --- all heads: click a tile ------------------------------------------------------------------

def tile_point(page, layer: int, head: int, towards_corner: float = 0.3) -> tuple[float, float]:
    """Page coordinates inside the tile (layer, head) of the mosaic, `towards_corner` of the way
    from its centre to its top-left corner (a click need not hit the centre)."""
    return tuple(page.evaluate(
        """([layer, head, share]) => {
            const plot = document.querySelectorAll('.js-plotly-plot')[0];
            const xa = plot._fullLayout.xaxis, ya = plot._fullLayout.yaxis;
            const tiles = plot._fullData.find(trace => trace.name === 'tiles');
            const i = layer * %d + head;
            const area = plot.querySelector('.nsewdrag').getBoundingClientRect();
            const half = (xa.l2p(tiles.x[1]) - xa.l2p(tiles.x[0])) / 2;
            return [area.left + xa.l2p(tiles.x[i]) - share * half,
                    area.top + ya.l2p(tiles.y[i]) - share * half];
        }""" % HEADS, [layer, head, towards_corner]))


def shown_head(page) -> tuple[str, str, str]:
    sliders = page.get_by_role("slider")
    title = page.locator(".js-plotly-plot").nth(1).locator(".gtitle").text_content()
    return sliders.nth(0).input_value(), sliders.nth(1).input_value(), title


def wait_for_head(page, layer: int, head: int) -> None:
    page.wait_for_function(
        """expected => document.querySelectorAll('.js-plotly-plot')[1]
               ?.querySelector('.gtitle')?.textContent === expected""",
        arg=f"Layer {layer} · Head {head}", timeout=60_000)
    wait_idle(page)


def test_clicking_a_tile_opens_that_head(app_url, page):
    open_page(page, f"{app_url}/all_heads", "All heads at once")
    page.locator(".js-plotly-plot").nth(1).wait_for(timeout=60_000)
    assert shown_head(page) == ("0", "0", "Layer 0 · Head 0")

    x, y = tile_point(page, 3, 7)
    page.mouse.click(x, y)
    wait_for_head(page, 3, 7)
    assert shown_head(page) == ("3", "7", "Layer 3 · Head 7")
    query = parse_qs(urlsplit(page.url).query)
    assert query["layer"] == ["3"] and query["head"] == ["7"]

    x, y = tile_point(page, 5, 11, towards_corner=-0.3)  # another tile, below right of centre
    page.mouse.click(x, y)
    wait_for_head(page, 5, 11)
    assert shown_head(page) == ("5", "11", "Layer 5 · Head 11")
    assert_clean(page)


# --- bertviz: the views in their frames -------------------------------------------------------

def frame_of(page, selector: str):
    element = page.locator(selector)
    element.wait_for(timeout=60_000)
    frame = element.element_handle().content_frame()
    frame.locator("#vis svg").wait_for(timeout=60_000)
    return element, frame


def visible_heads(frame) -> list[int]:
    """The heads whose lines the head view currently draws (stroke-opacity above 0)."""
    return frame.evaluate("""() => [...document.querySelectorAll('#attention .headAttention')]
        .filter(group => [...group.querySelectorAll('line')]
            .some(line => +line.getAttribute('stroke-opacity') > 0))
        .map(group => +group.getAttribute('head-index'))""")


def test_head_view_numbers_its_colours_and_a_double_click_isolates_a_head(app_url, page):
    open_page(page, f"{app_url}/bertviz_views", "bertviz views")
    _, frame = frame_of(page, HEAD_VIEW_FRAME)
    numbers = frame.locator("text.head-number")
    numbers.nth(HEADS - 1).wait_for(state="attached", timeout=30_000)
    assert numbers.all_text_contents() == [str(head) for head in range(HEADS)]
    squares = frame.locator("#vis svg > g:not([id]) > rect")
    for head in (0, 10, 11):  # each number sits on its own square
        number, square = numbers.nth(head).bounding_box(), squares.nth(head).bounding_box()
        centre = (number["x"] + number["width"] / 2, number["y"] + number["height"] / 2)
        assert square["x"] < centre[0] < square["x"] + square["width"]
        assert square["y"] < centre[1] < square["y"] + square["height"]
    assert visible_heads(frame) == list(range(HEADS))

    squares.nth(5).click()  # a click hides a head (the number lets clicks through)
    assert visible_heads(frame) == [h for h in range(HEADS) if h != 5]
    squares.nth(3).dblclick()  # a double-click shows only that head
    assert visible_heads(frame) == [3]
    squares.nth(3).dblclick()  # and again: every head
    assert visible_heads(frame) == list(range(HEADS))

    frame.select_option("#layer", "4")  # bertviz redraws: the numbers come back
    frame.locator("text.head-number").nth(HEADS - 1).wait_for(state="attached", timeout=30_000)
    assert frame.locator("text.head-number").count() == HEADS
    assert_clean(page)


def settled_boxes(page, element, inner, polls: int = 40) -> tuple[dict, dict]:
    """The frame's and the drawing's boxes once the frame has taken its final height (it is
    resized after its script has drawn; on a busy machine that can come a moment later)."""
    outer, drawing = element.bounding_box(), inner.bounding_box()
    for _ in range(polls):
        if drawing["y"] + drawing["height"] <= outer["y"] + outer["height"] + 0.5:
            break
        page.wait_for_timeout(250)
        outer, drawing = element.bounding_box(), inner.bounding_box()
    return outer, drawing


def test_model_view_fits_its_frame_with_every_head_and_draws_the_chosen_ones(app_url, page):
    open_page(page, f"{app_url}/bertviz_views", "bertviz views")
    page.get_by_text("Model view", exact=True).click()
    wait_idle(page)
    element, frame = frame_of(page, MODEL_VIEW_FRAME)
    frame.locator(".attn_background").nth(6 * HEADS - 1).wait_for(state="attached",
                                                                  timeout=60_000)
    outer, drawing = settled_boxes(page, element, frame.locator("#vis svg"))  # page coordinates
    assert drawing["x"] >= outer["x"] and drawing["x"] + drawing["width"] <= outer["x"] + \
        outer["width"] + 0.5, (drawing, outer)
    assert drawing["y"] + drawing["height"] <= outer["y"] + outer["height"] + 0.5
    assert frame.evaluate("document.documentElement.scrollWidth <= innerWidth")
    last = frame.locator(".attn_background").nth(6 * HEADS - 1).bounding_box()  # layer 5, head 11
    assert last["x"] + last["width"] <= outer["x"] + outer["width"]
    labels = frame.locator("#vis svg > text").all_text_contents()
    assert labels[:HEADS + 1] == ["Heads"] + [str(head) for head in range(HEADS)]

    last_thumbnail = frame.locator(".attn_background").nth(6 * HEADS - 1)
    last_thumbnail.click(force=True)  # a click draws that head large
    assert "Layer 5, Head 11" in frame.locator("text.detail").all_text_contents()

    layers = page.locator('[data-testid="stMultiSelect"]').first  # remove layers 1 to 4
    for layer in ("1", "2", "3", "4"):
        layers.get_by_role("button", name=f"Remove {layer}", exact=True).click()
        wait_idle(page)
    # the last removal's run has finished when the view's link says so; the frame it draws
    # replaces the old one (the locator finds the frame anew each time it looks)
    page.wait_for_function("() => new URLSearchParams(location.search).get('layers') === '0,5'",
                           timeout=60_000)
    wait_idle(page)
    expect(page.frame_locator(MODEL_VIEW_FRAME).locator(".attn_background")).to_have_count(
        2 * HEADS, timeout=60_000)
    element, frame = frame_of(page, MODEL_VIEW_FRAME)
    labels = frame.locator("#vis svg > text").all_text_contents()
    assert labels[HEADS + 1:] == ["Layers", "0", "5"]
    assert_clean(page)
