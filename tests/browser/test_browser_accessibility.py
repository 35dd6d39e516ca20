"""Accessibility in the real browser beyond each page as it opens (every page passes axe-core in
both themes in test_browser_pages.py): the panels that open (the sidebar's model panel, the top
bar's menus) pass axe-core too, presenter mode switched on in the sidebar follows the menu and
folds the sidebar away, and the keyboard alone drives the sidebar and a page's slider to a new
figure."""

from __future__ import annotations

from urllib.parse import urlparse

from tests.browser.page_checks import (MEASURE, PRESENTER_PX, PRESENTER_STYLE, SLOW_MS,
                                       blocking_violations, figure_problems, settle)
from tests.browser.page_checks import page  # noqa: F401 (the fixture)
from tests.browser_support import PAGES, set_sidebar_text, visit, wait_idle

MAX_TABS = 80  # a control further than this many Tab presses away counts as unreachable


def open_by_menu(page, path: str) -> None:
    """Go to the page at `path` by the top bar's menus, in the same session (its settings stay)."""
    sections = page.locator('[data-testid="stTopNavSection"]')
    for index in range(sections.count()):
        sections.nth(index).click()
        links = page.locator('[data-testid="stTopNavDropdownLink"]')
        links.first.wait_for(timeout=10_000)
        for link in links.all():
            if urlparse(link.get_attribute("href") or "").path.strip("/") == path:
                link.click()
                return
        page.keyboard.press("Escape")
    raise AssertionError(f"no menu link to /{path}")


def test_the_panels_pass_axe_and_presenter_mode_follows_the_menu(app_url, page):
    """The panels that open (the sidebar's model panel, the top bar's menus) pass axe-core;
    presenter mode switched on in the sidebar stays on for a page opened by the menu, as a
    lecturer would go, and that page passes too."""
    visit(page, app_url, PAGES[0][0], PAGES[0][1])
    settle(page)
    page.get_by_text("Use another pretrained model", exact=True).click()
    page.get_by_label("Hugging Face model id or local folder").wait_for()
    problems = blocking_violations(page, "sidebar model panel open")
    sections = page.locator('[data-testid="stTopNavSection"]')
    for index in range(sections.count()):
        sections.nth(index).click()
        page.locator('[data-testid="stTopNavDropdownLink"]').first.wait_for(timeout=10_000)
        problems += blocking_violations(page, f"top menu {index} open")
        page.keyboard.press("Escape")

    page.get_by_text("Presenter mode", exact=True).click()
    wait_idle(page, SLOW_MS)
    path, heading = next(entry for entry in PAGES if entry[0] == "head_statistics")
    open_by_menu(page, path)
    page.get_by_role("heading", name=heading).first.wait_for(timeout=SLOW_MS)
    settle(page)
    assert page.evaluate("text => [...document.querySelectorAll('style')].some(s => "
                         "s.textContent.includes(text))", PRESENTER_STYLE)
    problems += blocking_violations(page, f"/{path} presenter by the menu")
    figures, named = figure_problems(page, f"/{path} presenter by the menu")
    assert problems + named == [], "\n".join(problems + named)
    assert figures >= 1
    assert page.outside_requests == []


STEPS = "One attention row, step by step"
SIDEBAR_WIDTH = """() => document.querySelector('[data-testid="stSidebar"]')
    .getBoundingClientRect().width"""


def wait_for_sidebar(page, shown: bool) -> None:
    """Wait until the sidebar has slid fully in (`shown`) or out."""
    page.wait_for_function(f"() => ({SIDEBAR_WIDTH})() {'> 200' if shown else '=== 0'}",
                           timeout=10_000)


def test_presenter_mode_folds_the_sidebar_and_leaves_it_open_once_reopened(app_url, page):
    """A prepared slide's link (`present=true`) opens with the sidebar folded, so the page has
    the projector's whole width, and the Tab key goes through the page, not through the folded
    sidebar's controls; turning presenter mode on in the sidebar folds it too. A lecturer who
    opens it again to type a sentence keeps it open while the page redraws, and turning the
    mode off leaves it open; beside it, the figures' text still fits them (a step's title over
    the half-page figure left it and ran into a tick label)."""
    page.goto(f"{app_url}/row_arithmetic?present=true")
    page.get_by_role("heading", name=STEPS).first.wait_for(timeout=SLOW_MS)
    settle(page)
    wait_for_sidebar(page, shown=False)
    page.wait_for_timeout(400)  # the sidebar's slide (0.3 s): then it is hidden, not only moved
    for _ in range(4):
        page.keyboard.press("Tab")
        assert not page.evaluate("""() => !!document.activeElement
            .closest('[data-testid="stSidebar"]')"""), "the Tab key reached the folded sidebar"
    visit(page, app_url, "row_arithmetic", STEPS)  # a new session: presenter mode off
    settle(page)
    wait_for_sidebar(page, shown=True)
    switch = page.get_by_role("switch", name="Presenter mode")
    switch.focus()
    page.keyboard.press("Space")
    wait_for_sidebar(page, shown=False)
    page.locator('[data-testid="stExpandSidebarButton"]').click()
    wait_for_sidebar(page, shown=True)
    set_sidebar_text(page, "The banana flies like an arrow.")
    page.wait_for_function("""() => [...document.querySelectorAll('.js-plotly-plot .xtick')]
        .some(tick => tick.textContent.startsWith('banana'))""", timeout=SLOW_MS)
    wait_idle(page, SLOW_MS)
    assert page.evaluate(SIDEBAR_WIDTH) > 200, "the reopened sidebar folded again on a redraw"
    assert page.evaluate(MEASURE) == []
    switch.focus()
    page.keyboard.press("Space")
    page.wait_for_function("text => ![...document.querySelectorAll('style')].some(s => "
                           "s.textContent.includes(text))", arg=PRESENTER_STYLE, timeout=SLOW_MS)
    wait_idle(page, SLOW_MS)
    assert page.evaluate(SIDEBAR_WIDTH) > 200, "turning presenter mode off folded the sidebar"
    assert page.outside_requests == []


def tab_to(page, accept: str) -> int:
    """Press Tab until the focused element satisfies the JavaScript predicate `accept` (given
    the element); returns the number of presses."""
    for presses in range(1, MAX_TABS + 1):
        page.keyboard.press("Tab")
        if page.evaluate(f"() => ({accept})(document.activeElement)"):
            return presses
    raise AssertionError(f"{accept} not reached in {MAX_TABS} Tab presses")


def test_the_keyboard_alone_drives_the_sidebar_and_a_pages_slider(app_url, page):
    """From the top of the attention maps page: Tab to the sentence box, type a new sentence and
    apply it (Ctrl+Enter), see the map's labels change; Tab on to the page's first slider (the
    layer), press the right arrow, see the map of the next layer; Tab to the presenter switch
    and press Space: the map is drawn again in presenter mode. No mouse anywhere."""
    visit(page, app_url, PAGES[0][0], PAGES[0][1])
    settle(page)
    heatmap = page.locator(".st-key-maps_heatmap .js-plotly-plot")
    assert heatmap.locator(".gtitle").text_content() == "Layer 0 · Head 0"

    tab_to(page, "e => e.tagName === 'TEXTAREA' && e.getAttribute('aria-label') === 'Sentence'")
    page.keyboard.press("Control+A")
    page.keyboard.type("Fruit flies like a banana.")
    page.keyboard.press("Control+Enter")
    heatmap.locator(".xtick text", has_text="banana").first.wait_for(timeout=60_000)
    settle(page)

    tab_to(page, "e => e.closest('[data-testid=\"stMain\"]') && (e.getAttribute('role') === "
                 "'slider' || e.type === 'range')")
    assert page.evaluate("() => document.activeElement.getAttribute('aria-label') || "
                         "document.activeElement.labels?.[0]?.textContent") == "Layer"
    page.keyboard.press("ArrowRight")
    page.wait_for_function("""() => document.querySelector(
        '.st-key-maps_heatmap .js-plotly-plot .gtitle')?.textContent === 'Layer 1 · Head 0'""",
                           timeout=60_000)
    settle(page)
    assert "banana" in heatmap.locator(".xtick").all_text_contents()

    tab_to(page, "e => e.getAttribute('role') === 'switch' && e.closest('label')?.textContent"
                 ".includes('Presenter mode')")
    page.keyboard.press("Space")
    page.wait_for_function("text => [...document.querySelectorAll('style')].some(s => "
                           "s.textContent.includes(text))", arg=PRESENTER_STYLE, timeout=60_000)
    # the map already drawn is drawn again at presenter size (pages opened in presenter mode are
    # measured in test_browser_pages.py)
    page.wait_for_function("""size => {
        const texts = [...document.querySelectorAll('.st-key-maps_heatmap .js-plotly-plot '
                                                    + ':is(.xtick text, .ytick text, .gtitle)')];
        return texts.length > 0
            && texts.every(text => parseFloat(getComputedStyle(text).fontSize) >= size);
    }""", arg=PRESENTER_PX, timeout=60_000)
    assert page.outside_requests == []
