"""The three pages of causal interventions draw in Chromium on their chapter examples: the
embedded MiniLM has no LM head, so each page says so and offers the causal decoder; one click
and the page draws its figures (patching and attribution on the indirect-object example). Their
presenter layout is checked with the other pages whose choices sit beside their main figure
(test_browser_beside.py)."""

from __future__ import annotations

import pytest

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
