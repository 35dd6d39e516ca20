"""Presenting a deck in the real browser at 1280 x 720: the sidebar closes, the slide's main
figure is on the first screen, and the arrow keys move through the deck (the page's own script,
nothing fetched)."""

from __future__ import annotations

from tests.app_support import GUARD_MESSAGE
from tests.browser_support import guard_requests, wait_idle

VIEWPORT = {"width": 1280, "height": 720}
SLOW_MS = 240_000


def _bar_says(page, words: str) -> None:
    page.locator(".st-key-deck_bar").get_by_text(words).wait_for(timeout=SLOW_MS)
    wait_idle(page, SLOW_MS)


def _main_figure_on_screen(page, key: str) -> None:
    chart = page.locator(f".st-key-{key} .main-svg").first
    chart.wait_for(timeout=SLOW_MS)
    page.wait_for_function(
        """key => {
            const box = document.querySelector(`.st-key-${key}`).getBoundingClientRect();
            return box.height > 150 && box.top >= 0 && box.bottom <= window.innerHeight;
        }""", arg=key, timeout=30_000)


def test_a_deck_presents_with_the_arrow_keys_and_its_figures_on_the_first_screen(app_url,
                                                                                 browser):
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    outside = guard_requests(page)
    try:
        page.goto(f"{app_url}/deck?choice=chapter-0")
        page.get_by_role("heading", name="Slide decks").wait_for(timeout=SLOW_MS)
        wait_idle(page, SLOW_MS)
        page.locator(".st-key-deck_present button").click()
        _bar_says(page, "slide 1 of 8")
        page.get_by_role("heading", name="Why attention is scaled").wait_for()
        page.locator('[data-testid="stSidebar"][data-collapsed="true"]').wait_for(state="attached",
                                                                                 timeout=30_000)
        _main_figure_on_screen(page, "scaling_dots")
        assert "dk=10&" in page.url + "&" and "present=true" in page.url

        page.keyboard.press("ArrowRight")
        _bar_says(page, "slide 2 of 8")
        page.wait_for_function("() => location.search.includes('dk=10000')", timeout=SLOW_MS)
        page.keyboard.press("ArrowRight")
        _bar_says(page, "slide 3 of 8")
        page.get_by_role("heading", name="Attention maps").wait_for(timeout=SLOW_MS)
        _main_figure_on_screen(page, "maps_heatmap")
        page.keyboard.press("ArrowLeft")
        _bar_says(page, "slide 2 of 8")
        page.get_by_role("heading", name="Why attention is scaled").wait_for(timeout=SLOW_MS)

        assert page.locator('[data-testid="stException"]').count() == 0
        assert page.get_by_text(GUARD_MESSAGE).count() == 0
        assert outside == []
    finally:
        context.close()


def test_a_warmed_deck_is_still_the_chosen_one_and_presents(app_url, browser):
    """Warming a deck that is not the first walks every other page; back on the deck page the
    same deck is chosen, so Present presents it (not the first deck)."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    outside = guard_requests(page)
    try:
        page.goto(f"{app_url}/deck?choice=chapter-2")
        page.get_by_role("heading", name="Slide decks").wait_for(timeout=SLOW_MS)
        wait_idle(page, SLOW_MS)
        page.locator(".st-key-deck_warm button").first.click()
        page.get_by_text("Warmed up 2 slides").wait_for(timeout=SLOW_MS)
        wait_idle(page, SLOW_MS)
        page.locator(".st-key-deck_present button").first.click()
        _bar_says(page, "slide 1 of 2")
        assert "Chapter 2" in page.locator(".st-key-deck_bar").inner_text()
        _main_figure_on_screen(page, "maps_heatmap")
        page.keyboard.press("ArrowRight")
        _bar_says(page, "slide 2 of 2")
        _main_figure_on_screen(page, "rollout_rolled")
        page.locator(".st-key-deck_end button").first.click()  # a rerun may show the old one
        page.get_by_role("heading", name="Slide decks").wait_for(timeout=SLOW_MS)
        wait_idle(page, SLOW_MS)
        page.locator(".st-key-deck_present button").first.click()
        _bar_says(page, "slide 1 of 2")  # after End, the same deck again

        assert page.locator('[data-testid="stException"]').count() == 0
        assert page.get_by_text(GUARD_MESSAGE).count() == 0
        assert outside == []
    finally:
        context.close()
