"""The real thing for links: a deep link opened in a fresh browser shows that exact view, the
URL follows the controls (even when they move faster than the connection answers), browser back
and forward restore the previous view, and the sidebar offers the full link."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from playwright.sync_api import expect

from tests.app_support import GUARD_MESSAGE
from tests.browser_support import guard_requests, switch_on, wait_idle

TEXT = "Mario is short, but he can jump super high."
DEEP_LINK = f"/attention_maps?text={quote(TEXT)}&layer=5&head=5"
DEFAULT_PAGE_LINK = f"/?text={quote(TEXT)}&layer=5&head=5"  # the form the app itself writes
TITLE = ".js-plotly-plot .gtitle"
# A slow connection: every message from the server reaches the page `window.__socketDelayMs`
# later, in order, so the browser sends its next rerun before it has the query the last run wrote.
SLOW_SOCKET = """
(() => {
  const Native = window.WebSocket;
  window.__socketDelayMs = 0;
  const later = (socket, handler) => event =>
    setTimeout(() => handler.call(socket, event), window.__socketDelayMs);
  class SlowSocket extends Native {
    constructor(...args) { super(...args); this.__wrapped = new Map(); }
    addEventListener(type, handler, options) {
      if (type !== "message" || typeof handler !== "function") {
        return super.addEventListener(type, handler, options);
      }
      const wrapped = later(this, handler);
      this.__wrapped.set(handler, wrapped);
      return super.addEventListener(type, wrapped, options);
    }
    removeEventListener(type, handler, options) {
      return super.removeEventListener(type, this.__wrapped.get(handler) || handler, options);
    }
    set onmessage(handler) { super.onmessage = handler ? later(this, handler) : null; }
    get onmessage() { return super.onmessage; }
  }
  window.WebSocket = SlowSocket;
})();
"""


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1200})  # fresh: no state
    tab = context.new_page()
    tab.outside_requests = guard_requests(tab)
    yield tab
    context.close()


def heatmap_title(page, expected: str) -> None:
    page.wait_for_function(
        "expected => document.querySelector('.js-plotly-plot .gtitle')?.textContent === expected",
        arg=expected, timeout=60_000)


def assert_query(url: str, expected: dict[str, str]) -> None:
    """The link's query holds `expected` (the page may add its other controls)."""
    query = parse_qs(urlsplit(url).query)
    assert {name: query.get(name) for name in expected} == \
        {name: [value] for name, value in expected.items()}, query


def assert_clean(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0
    alerts = page.locator('[data-testid="stAlert"]').all_text_contents()
    assert not [text for text in alerts if GUARD_MESSAGE in text], alerts
    assert page.outside_requests == []


def test_a_deep_link_opens_that_view_and_back_and_forward_restore_views(app_url, page):
    page.goto(app_url + DEEP_LINK)
    page.get_by_role("heading", name="Attention maps").first.wait_for(timeout=90_000)
    wait_idle(page)
    heatmap_title(page, "Layer 5 · Head 5")
    ticks = page.locator(".js-plotly-plot").first.locator(".xtick text").all_text_contents()
    assert ticks == ["[CLS]", "mario", "is", "short", ",", "but", "he", "can", "jump", "super",
                     "high", ".", "[SEP]"]
    sliders = page.get_by_role("slider")
    assert [sliders.nth(i).input_value() for i in range(2)] == ["5", "5"]
    assert page.get_by_label("Sentence", exact=True).input_value() == TEXT
    assert_query(page.url, {"text": TEXT, "layer": "5", "head": "5"})
    assert_clean(page)

    # the URL follows a control, one history entry per change
    slider = sliders.nth(1)
    slider.focus()
    slider.press("ArrowLeft")
    wait_idle(page)
    heatmap_title(page, "Layer 5 · Head 4")
    page.wait_for_function("() => new URLSearchParams(location.search).get('head') === '4'",
                           timeout=30_000)

    # the sidebar offers the whole link, with this server's address
    page.get_by_role("button", name="Link to this view").click()
    code = page.locator('[data-testid="stPopoverBody"] code').first
    code.wait_for(timeout=30_000)
    shown = code.text_content().strip()
    assert shown.startswith(app_url + "/?") or shown.startswith(app_url + "/attention_maps?")
    assert_query(shown, {"text": TEXT, "layer": "5", "head": "4"})
    assert_query(page.url, {"text": TEXT, "layer": "5", "head": "4"})
    page.keyboard.press("Escape")

    # back restores the previous view, forward the later one
    page.go_back()
    wait_idle(page)
    heatmap_title(page, "Layer 5 · Head 5")
    assert_query(page.url, {"text": TEXT, "layer": "5", "head": "5"})
    # the slider follows its own delta a moment after the map's title (seen once in a fresh
    # clone: the title read Head 5 and the slider still 4): waited for, not read at once
    expect(page.get_by_role("slider").nth(1)).to_have_value("5", timeout=30_000)
    page.go_forward()
    wait_idle(page)
    heatmap_title(page, "Layer 5 · Head 4")
    assert_clean(page)


def test_a_link_with_a_layer_the_model_lacks_falls_back_with_a_note(app_url, page):
    page.goto(f"{app_url}/all_heads?text={quote(TEXT)}&layer=40&head=3")
    page.get_by_role("heading", name="All heads at once").first.wait_for(timeout=90_000)
    wait_idle(page)
    page.get_by_text("Layer 40 does not exist here").first.wait_for(timeout=60_000)
    heatmap = page.locator(".js-plotly-plot").nth(1).locator(".gtitle")
    page.wait_for_function(
        "() => document.querySelectorAll('.js-plotly-plot')[1]?.querySelector('.gtitle')"
        "?.textContent === 'Layer 5 · Head 3'", timeout=60_000)
    assert heatmap.text_content() == "Layer 5 · Head 3"
    page.wait_for_function("() => new URLSearchParams(location.search).get('layer') === '5'",
                           timeout=30_000)
    assert_clean(page)


def test_quick_slider_moves_all_land_even_when_the_connection_lags(app_url, page):
    """Each key press reruns the page before the browser has received the link the previous run
    wrote: the rerun carries an older query, which must not be read as a link to go back to."""
    page.add_init_script(SLOW_SOCKET)
    page.goto(app_url + DEFAULT_PAGE_LINK)
    page.get_by_role("heading", name="Attention maps").first.wait_for(timeout=90_000)
    wait_idle(page)
    heatmap_title(page, "Layer 5 · Head 5")
    page.wait_for_function("() => new URLSearchParams(location.search).get('head') === '5'",
                           timeout=30_000)
    page.evaluate("() => { window.__socketDelayMs = 3000; }")
    slider = page.get_by_role("slider").nth(1)
    slider.focus()
    for _ in range(3):
        slider.press("ArrowLeft")
        page.wait_for_timeout(1000)  # the server finishes that run, the browser hears later
    page.wait_for_function(  # every delayed message has arrived and the map shows the last head
        "() => new URLSearchParams(location.search).get('head') === '2' && document"
        ".querySelector('.js-plotly-plot .gtitle')?.textContent === 'Layer 5 · Head 2'",
        timeout=60_000)
    page.wait_for_timeout(3_000)  # nothing arriving later moves it back
    wait_idle(page)
    assert page.get_by_role("slider").nth(1).input_value() == "2"
    assert_query(page.url, {"text": TEXT, "layer": "5", "head": "2"})
    heatmap_title(page, "Layer 5 · Head 2")

    # there and back: the second run is given the query it shows (head=2), but the browser is
    # still to receive head=3 from the first, so the second run writes head=2 all the same
    slider.press("ArrowRight")
    page.wait_for_timeout(1000)
    slider.press("ArrowLeft")
    page.wait_for_timeout(6_000)  # every delayed message has arrived
    wait_idle(page)
    assert page.get_by_role("slider").nth(1).input_value() == "2"
    assert_query(page.url, {"text": TEXT, "layer": "5", "head": "2"})
    heatmap_title(page, "Layer 5 · Head 2")
    assert_clean(page)


def test_the_default_pages_own_name_opens_it_with_the_links_values(app_url, page):
    """`/attention_maps?…` (the default page by name) in a later session: the same view, with no
    "Page not found" box (which would also take the keyboard focus from the sliders)."""
    page.goto(f"{app_url}/attention_maps?text={quote(TEXT)}&layer=2&head=3")
    page.get_by_role("heading", name="Attention maps").first.wait_for(timeout=90_000)
    wait_idle(page)
    heatmap_title(page, "Layer 2 · Head 3")
    assert page.get_by_text("Page not found").count() == 0
    assert page.get_by_label("Sentence", exact=True).input_value() == TEXT
    assert_query(page.url, {"text": TEXT, "layer": "2", "head": "3"})
    assert_clean(page)


@pytest.mark.parametrize("present", [False, True], ids=["plain", "presenter"])
def test_typing_as_a_link_opens_keeps_the_links_model_and_controls(app_url, page, present):
    """A sentence typed while the link's first run is ending (its last messages can be dropped
    by the rerun the typing starts) must not lose what the link set: the next control moved
    would otherwise send the widgets' defaults back (the encoder, layer 0, presenter off)."""
    link = "all_heads?model=decoder&layer=3" + ("&present=true" if present else "")
    page.goto(f"{app_url}/{link}")
    if present:  # a presenter link opens with the sidebar folded: the lecturer opens it to type
        page.locator('[data-testid="stExpandSidebarButton"]').click()
    box = page.get_by_label("Sentence", exact=True)
    box.fill("The keys to the cabinet are on the table.")
    box.press("Control+Enter")
    wait_idle(page, 120_000)
    switch_on(page, page.get_by_role("switch", name="Merge word pieces into words"))
    wait_idle(page, 120_000)
    # the switch's run writes the link; on a loaded machine it may start after wait_idle's look
    expect(page).to_have_url(re.compile(r"[?&]merge=true(&|$)"), timeout=60_000)
    query = parse_qs(urlsplit(page.url).query)
    assert page.get_by_role("radio", name="Pretrained causal decoder").is_checked(), page.url
    assert query.get("model") == ["decoder"] and query.get("layer") == ["3"], query
    assert query.get("merge") == ["true"] and (query.get("present") == ["true"]) == present, query
    assert page.get_by_text(GUARD_MESSAGE).count() == 0
    assert page.outside_requests == []
