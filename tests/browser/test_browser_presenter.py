"""Presenter mode in the real browser at a projector's 1280 x 720: each main page's main figure
lies wholly inside the screen with the sidebar collapsed, and nothing breaks or leaves the
machine. Screenshots go to artifacts/presenter/."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app_support import GUARD_MESSAGE
from tests.browser_support import guard_requests, wait_idle

SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "presenter"
VIEWPORT = {"width": 1280, "height": 720}
DECODER = "?text=The%20capital%20of%20France%20is&model=decoder"
# (url, heading, the main figure: the chart key's CSS class, or "" for the page's first figure)
PAGES = [
    ("", "Attention maps", "st-key-maps_heatmap"),
    ("all_heads", "All heads at once", ""),
    ("predictions" + DECODER, "What the model predicts", "st-key-pred_next"),
    ("generation" + DECODER, "Generation, one token at a time", ""),
    ("cross_attention", "Cross-attention: an encoder–decoder translating", ""),
    ("head_statistics", "Head statistics", "st-key-stats_grid"),
    ("rollout", "Attention rollout", "st-key-rollout_rolled"),
    ("causal_masks", "Causal and padding masks", "st-key-masks_side_by_side"),
    ("scaling", "Why attention is scaled", ""),
]
SLOW_MS = 240_000  # the first decoder or translator use on a machine prepares it


def _presenter_on_sidebar_off(page) -> None:
    """Presenter settings are per viewer (not in links): switch them on as a teacher would."""
    page.get_by_text("Presenter mode", exact=True).click()
    wait_idle(page, SLOW_MS)
    page.wait_for_function("""() => [...document.querySelectorAll('style')]
        .some(s => s.textContent.includes('html { font-size: 18px; }'))""")
    page.locator('[data-testid="stSidebar"]').hover()
    page.locator('[data-testid="stSidebarCollapseButton"] button').click()
    page.locator('[data-testid="stExpandSidebarButton"]').wait_for()
    page.wait_for_timeout(600)  # the sidebar's closing transition; figures then resize


@pytest.mark.parametrize("path, heading, main", PAGES, ids=[p[0].split("?")[0] or "home"
                                                            for p in PAGES])
def test_main_figure_fits_a_1280x720_screen_in_presenter_mode(app_url, browser, path, heading,
                                                               main):
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    outside = guard_requests(page)
    try:
        page.goto(f"{app_url}/{path}")
        page.get_by_role("heading", name=heading).first.wait_for(timeout=SLOW_MS)
        wait_idle(page, SLOW_MS)
        _presenter_on_sidebar_off(page)
        chart = page.locator(f".{main} .js-plotly-plot" if main else ".js-plotly-plot").first
        chart.wait_for(timeout=SLOW_MS)
        chart.locator(".main-svg").first.wait_for(timeout=SLOW_MS)
        wait_idle(page, SLOW_MS)
        # the figure brought on screen, as a deck's slide does (a page may start with its text)
        chart.evaluate("chart => chart.scrollIntoView({block: 'center'})")
        page.wait_for_timeout(300)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        name = path.split("?")[0] or "attention_maps"
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
        box = chart.bounding_box()
        assert box is not None and box["width"] > 200 and box["height"] > 150, box
        assert box["x"] >= 0 and box["y"] >= 0, box
        assert box["x"] + box["width"] <= VIEWPORT["width"], box
        assert box["y"] + box["height"] <= VIEWPORT["height"], box
        # presenter text really is large in the figure: its title and tick labels
        sizes = page.evaluate(
            """chart => [...chart.querySelectorAll('.xtick text, .ytick text, .gtitle')]
                .map(t => parseFloat(getComputedStyle(t).fontSize))""", chart.element_handle())
        assert sizes and min(sizes) >= 18, sizes
        body = page.evaluate("""() => parseFloat(getComputedStyle(
            document.querySelector('[data-testid="stMain"] [data-testid="stMarkdownContainer"] p')
            || document.body).fontSize)""")
        assert body >= 18
        assert page.locator('[data-testid="stException"]').count() == 0
        assert page.get_by_text(GUARD_MESSAGE).count() == 0
        assert outside == []
    finally:
        context.close()
