"""The three pages of causal interventions draw in Chromium on their chapter examples: the
embedded MiniLM has no LM head, so each page says so and offers the causal decoder; one click
and the page draws its figures (patching and attribution on the indirect-object example). In
presenter mode on a 1280 x 720 screen, the attribution's map of the heads is wholly on the first
screen (its choices beside it, every token pill in view) and its bar chart names every bar."""

from __future__ import annotations

import pytest

from tests.browser.page_checks import VIEWPORT, open_presenting
from tests.browser.test_browser import SCREENSHOTS, assert_clean, page  # noqa: F401 (fixture)
from tests.browser_support import visit, wait_idle

# Each page, its heading, how many figures it draws, and a word of the text it reads: the
# patching and attribution pages their own prompt pair (the chapter's indirect-object example),
# the logit lens the sidebar's sentence.
PAGES = [
    ("activation_patching", "Activation patching", 2, "Mary"),
    ("logit_lens", "Logit lens", 2, "arrow"),
    ("logit_attribution", "Direct logit attribution", 2, "Mary"),
]


@pytest.mark.parametrize(("path", "heading", "figures", "word"), PAGES)
def test_the_page_draws_its_figures_on_the_decoder(app_url, page, path, heading, figures, word):
    visit(page, app_url, path, heading)
    assert page.get_by_text("has no prediction head", exact=False).count() == 1
    page.get_by_role("button", name="Use the causal decoder").click()
    wait_idle(page, timeout_ms=300_000)
    page.locator(".js-plotly-plot").nth(figures - 1).wait_for(timeout=300_000)
    assert page.locator(".js-plotly-plot svg.main-svg").count() >= figures
    assert page.get_by_text(word, exact=False).count() >= 1
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{path}-decoder.png"), full_page=True)
    assert_clean(page)


def test_the_attribution_opens_on_its_map_and_names_every_bar_in_presenter_mode(app_url, page):
    page.set_viewport_size(VIEWPORT)
    open_presenting(page, app_url, "logit_attribution?model=decoder", "Direct logit attribution",
                    figures=2)
    heads = page.locator(".st-key-dla_heads .js-plotly-plot").bounding_box()
    assert heads is not None and heads["height"] > 300, heads
    assert heads["y"] >= 0 and heads["y"] + heads["height"] <= VIEWPORT["height"], heads
    for pills in page.locator('[data-testid="stButtonGroup"]').all():  # wrapped, none hidden
        assert pills.evaluate("group => [...group.querySelectorAll('button')].every(button => "
                              "button.getBoundingClientRect().right <= "
                              "group.getBoundingClientRect().right + 1)"), pills.inner_text()
    chart = page.locator(".st-key-dla_bars .js-plotly-plot")
    bars = chart.evaluate("plot => plot.data[0].y.length")
    names = chart.locator(".ytick text").all_text_contents()
    assert bars == 12 and len(names) == bars, names  # the slider's default: 12 parts
    assert_clean(page)
