"""The three pages of causal interventions draw in Chromium on their chapter examples: the
embedded MiniLM has no LM head, so each page says so and offers the causal decoder; one click
and the page draws its figures (patching and attribution on the indirect-object example). In
presenter mode on a 1280 x 720 screen, the attribution's map of the heads, the patching grid and
the logit lens's map are wholly on the first screen (the choices beside them, every token pill
in view), no text of their figures overlaps another's (the lens's rank axis once labelled 6 to 9
on top of each other), and the attribution's bar chart names every bar."""

from __future__ import annotations

import pytest

from tests.browser.page_checks import MEASURE, VIEWPORT, close_sidebar, open_presenting
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


# The pages whose choices sit beside their main figure (with the link's other settings), and
# that figure's chart key; a grid of one layer's 9 heads is the shortest (its rows once
# overlapped their labels).
BESIDE = [("logit_attribution", "Direct logit attribution", "dla_heads", ""),
          ("activation_patching", "Activation patching", "patch_grid", ""),
          ("activation_patching", "Activation patching", "patch_grid", "&site=head_position"),
          ("logit_lens", "Logit lens", "lens_map", "")]


@pytest.mark.parametrize(("path", "heading", "key", "more"), BESIDE,
                         ids=["attribution", "patching", "patching-heads-of-a-layer", "lens"])
def test_the_page_opens_on_its_map_in_presenter_mode(app_url, page, path, heading, key, more):
    page.set_viewport_size(VIEWPORT)
    open_presenting(page, app_url, f"{path}?model=decoder{more}", heading, figures=2)
    shown = page.locator(f".st-key-{key} .js-plotly-plot").bounding_box()
    assert shown is not None and shown["height"] > 300, shown
    assert shown["y"] >= 0 and shown["y"] + shown["height"] <= VIEWPORT["height"], shown
    for pills in page.locator('[data-testid="stButtonGroup"]').all():  # wrapped, none hidden
        assert pills.evaluate("group => [...group.querySelectorAll('button')].every(button => "
                              "button.getBoundingClientRect().right <= "
                              "group.getBoundingClientRect().right + 1)"), pills.inner_text()
    if path == "logit_attribution":  # its bar chart names every bar at presenter size
        chart = page.locator(".st-key-dla_bars .js-plotly-plot")
        bars = chart.evaluate("plot => plot.data[0].y.length")
        names = chart.locator(".ytick text").all_text_contents()
        assert bars == 12 and len(names) == bars, names  # the slider's default: 12 parts
    close_sidebar(page)
    assert page.evaluate(MEASURE) == []  # no text of a figure overlapping another's
    assert_clean(page)
