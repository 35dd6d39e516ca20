"""The real thing: `streamlit run app.py` on loopback, driven in headless Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser_support import PAGES, set_sidebar_text, visit, wait_idle

SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
HOSTILE = "Quantum cats <script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned=2\">"


@pytest.fixture
def page(shared_tab):
    """The test process's shared tab (tests/conftest.py) at 1400 x 1600, its dialogs listed (and
    dismissed) in `tab.dialogs`."""
    shared_tab.set_viewport_size({"width": 1400, "height": 1600})
    if not hasattr(shared_tab, "dialogs"):
        shared_tab.on("dialog", lambda dialog: (shared_tab.dialogs.append(dialog.message),
                                                dialog.dismiss()))
    shared_tab.dialogs = []
    return shared_tab


GUARD_MESSAGE = "Something went wrong while drawing this page"


def assert_clean(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0
    assert page.get_by_text(GUARD_MESSAGE).count() == 0  # app.py's guard turned an error into this
    assert page.outside_requests == []
    assert page.dialogs == []
    assert page.evaluate("() => window.__pwned === undefined")


def test_typed_sentence_appears_on_the_heatmap_and_never_runs(app_url, page):
    visit(page, app_url, PAGES[0][0], PAGES[0][1])
    set_sidebar_text(page, HOSTILE)
    wait_idle(page)
    ticks = page.locator(".js-plotly-plot").first.locator(".xtick text")
    ticks.filter(has_text="quantum").first.wait_for(timeout=60_000)
    labels = ticks.all_text_contents()
    assert labels[:3] == ["[CLS]", "quantum", "cats"]
    assert "<" in labels and "script" in labels  # shown as text
    page.screenshot(path=str(SCREENSHOTS / "typed-sentence.png"))
    assert_clean(page)


def test_moving_a_slider_keeps_the_sidebar_and_redraws(app_url, page):
    visit(page, app_url, PAGES[0][0], PAGES[0][1])
    title = page.locator(".js-plotly-plot").first.locator(".gtitle")
    assert title.text_content() == "Layer 0 · Head 0"
    page.wait_for_function("() => location.search.includes('head=0')", timeout=60_000)
    slider = page.get_by_role("slider").nth(1)
    slider.focus()
    for _ in range(3):  # quickly: a rerun may leave before the previous run's link arrives
        slider.press("ArrowRight")
    page.wait_for_function(
        "() => new URLSearchParams(location.search).get('head') === '3' && [...document"
        ".querySelectorAll('.js-plotly-plot .gtitle')].some(t => t.textContent === "
        "'Layer 0 · Head 3')", timeout=90_000)
    wait_idle(page)
    assert slider.input_value() == "3"
    assert "head=3" in page.url
    page.wait_for_function(  # and no stale map of an earlier head is left on the page
        "() => [...document.querySelectorAll('.js-plotly-plot .gtitle')].map(t => t.textContent)"
        ".filter(t => t.startsWith('Layer 0 · Head ')).every(t => t === 'Layer 0 · Head 3')",
        timeout=60_000)
    assert page.get_by_label("Sentence", exact=True).count() == 1
    assert_clean(page)


def test_bertviz_views_draw_inside_the_app_offline(app_url, page):
    visit(page, app_url, "bertviz_views", "bertviz views")
    set_sidebar_text(page, HOSTILE)
    wait_idle(page)
    frame = page.frame_locator('iframe[title^="bertviz"]')
    frame.locator("#vis svg text", has_text="quantum").first.wait_for(timeout=60_000)
    frame.locator("#vis svg line").first.wait_for(state="attached", timeout=60_000)
    tokens = frame.locator("#vis svg text").all_text_contents()
    assert "quantum" in tokens and "script" in tokens
    page.screenshot(path=str(SCREENSHOTS / "bertviz-head-view.png"))
    page.get_by_text("Model view", exact=True).click()
    wait_idle(page)
    frame = page.frame_locator('iframe[title^="bertviz"]')
    frame.locator("#vis svg .attn_background").nth(6 * 12 - 1).wait_for(state="attached",
                                                                         timeout=60_000)
    page.screenshot(path=str(SCREENSHOTS / "bertviz-model-view.png"))
    assert_clean(page)
    for child in page.frames:
        assert child.evaluate("() => window.__pwned === undefined")


def test_generation_generates_and_the_step_slider_moves(app_url, page):
    """The decoder continues the prompt token by token; moving the step slider shows the next
    step's token and row (no new generation: the result is kept per session)."""
    page.goto(f"{app_url}/generation?text=The%20capital%20of%20France%20is&model=decoder")
    page.get_by_role("heading", name="Generation, one token at a time").first.wait_for(
        timeout=90_000)
    page.get_by_text("At step 0 the model read").first.wait_for(timeout=120_000)
    wait_idle(page)
    page.locator(".js-plotly-plot").nth(1).wait_for(timeout=60_000)
    slider = page.get_by_role("slider").first
    slider.focus()
    slider.press("ArrowRight")
    wait_idle(page)
    page.get_by_text("At step 1 the model read").first.wait_for(timeout=60_000)
    generated = page.locator('[data-testid="stMain"] [data-testid="stText"]').first.text_content()
    assert "Generated:" in generated and "Paris" in generated
    page.screenshot(path=str(SCREENSHOTS / "generation-step-1.png"), full_page=True)
    assert_clean(page)


def test_cross_attention_translates_and_draws_the_three_kinds(app_url, page):
    """The toy encoder–decoder (trained once per machine, then read from disk) translates the
    example sentence with its adjective moved after the noun, and draws its attention."""
    visit(page, app_url, "cross_attention", "Cross-attention: an encoder–decoder translating")
    page.locator('[data-testid="stMain"] strong', has_text="la voiture rouge").first.wait_for(
        timeout=180_000)
    page.locator(".js-plotly-plot").nth(2).wait_for(timeout=60_000)
    page.screenshot(path=str(SCREENSHOTS / "cross-attention.png"), full_page=True)
    assert_clean(page)


# Every page opened directly, with the sidebar and without an error: in
# test_browser_pages.py, which opens each page anyway (one visit a page, not two).


def test_the_menu_reaches_every_page_without_folding(app_url, page):
    """Every page of app.py is one click away: the top bar's section menus list them all (a
    sidebar menu folds after ten pages under "View N more", and pushes the sentence box down)."""
    import ast

    from tests.app_support import ROOT

    titles = [keyword.value.value for node in ast.walk(ast.parse((ROOT / "app.py").read_text()))
              if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "Page"
              for keyword in node.keywords if keyword.arg == "title"
              and not any(k.arg == "visibility" for k in node.keywords)]
    assert len(titles) >= 20
    visit(page, app_url, PAGES[0][0], PAGES[0][1])
    sections = page.locator('[data-testid="stTopNavSection"]')
    sections.first.wait_for(timeout=60_000)
    shown = []
    for index in range(sections.count()):
        sections.nth(index).click()
        links = page.locator('[data-testid="stTopNavDropdownLink"]')
        links.first.wait_for(timeout=10_000)
        for link in range(links.count()):
            assert links.nth(link).is_visible()
            box = links.nth(link).bounding_box()
            assert box["y"] + box["height"] <= page.viewport_size["height"]  # not cut off
        shown += [text.strip().splitlines()[-1] for text in links.all_inner_texts()]
        page.keyboard.press("Escape")
        page.wait_for_timeout(300)
    assert sorted(shown) == sorted(titles)
    assert page.get_by_text("View", exact=False).filter(has_text="more").count() == 0
    assert page.locator('[data-testid="stSidebar"]').get_by_text("Sentence").first.is_visible()
    assert_clean(page)


STATIC = """() => Object.fromEntries(performance.getEntriesByType('resource')
    .filter(entry => new URL(entry.name).pathname.includes('/static/'))
    .map(entry => [entry.name, entry.transferSize]))"""
TRY_OUTSIDE = """async () => {
    new WebSocket('ws://example.com/socket');
    try { await fetch('http://example.com/script.js', {mode: 'no-cors'}); return 'fetched'; }
    catch (error) { return 'failed'; }
}"""


def test_the_tab_lists_and_fails_requests_leaving_the_machine_and_keeps_its_cache(app_url, page):
    """The tests' guard (tests/browser_support.py): a request to another host fails and is listed,
    and the tab keeps the browser's cache, so a second page takes Streamlit's and Plotly's
    scripts from it instead of fetching them again."""
    visit(page, app_url, PAGES[0][0], PAGES[0][1])
    first = page.evaluate(STATIC)
    assert page.evaluate(TRY_OUTSIDE) == "failed"
    page.wait_for_function("() => true")  # the socket's event reaches the test
    assert sorted(page.outside_requests) == ["http://example.com/script.js",
                                             "ws://example.com/socket"]
    page.outside_requests.clear()
    visit(page, app_url, "all_heads", "All heads at once")
    again = {name: size for name, size in page.evaluate(STATIC).items() if name in first}
    assert len(again) >= 10 and set(again.values()) == {0}, again
    assert_clean(page)


def test_a_failed_tests_tab_is_kept_as_a_screenshot_then_closed(shared_tab, tmp_path):
    """After a browser test fails (tests/conftest.py), its shared tab is photographed whole and
    closed, so a failure seen only on a loaded machine leaves what the page showed; the next
    test gets a new tab."""
    from tests.conftest import PROCESS_CHROMIUM

    shared_tab.set_content("<h1 style='height: 3000px'>What the failure left</h1>")
    shot = tmp_path / "failures" / "the_test.png"
    PROCESS_CHROMIUM.drop_tab(shot)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(shot.read_bytes()[20:24], "big") >= 3000  # the whole page's height
    assert shared_tab.is_closed() and PROCESS_CHROMIUM.tab() is not shared_tab
