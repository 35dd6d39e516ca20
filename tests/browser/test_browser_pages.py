"""Every page in the real browser at a projector's 1280 x 720, opened by its address in the light
theme, then switched to presenter mode with the sidebar's switch, as a lecturer does in front of
the class (a link with `present=true`, as a prepared slide opens, is how the decoder's pages below
and tests/browser/test_browser_beside.py open theirs). Each is checked for everything at once
(tests/browser/page_checks.py):

- light: the sidebar's sentence box is beside the page; axe-core finds no serious or critical
  violation; every figure has a text alternative (its title and what it shows) and readable text;
  no text of a Plotly figure (titles, axis titles, tick labels, legends, annotations, colour bars)
  leaves its figure or overlaps another; every control takes the keyboard's focus; no exception,
  no app.py guard message;
- presenter mode, switched on in the sidebar (which folds it away): the same figures drawn,
  presenter mode's style on, axe-core and the figures' names again, no exception, no guard
  message;
- presenter mode, sidebar closed: no figure wider than the screen, no figure text leaving its
  figure or overlapping another, no display formula wider than its column or drawn under
  presenter size, and the page's main figure wholly on the screen with its title and tick labels
  at presenter size.

Nothing leaves the machine. One test per page (pytest-xdist spreads them); the decoder's pages are
also opened with the decoder chosen, where their main figure is drawn. Screenshots go to
artifacts/presenter/ (every main figure) and artifacts/layout/ (a page whose layout fails).
"""

from __future__ import annotations

import pytest

from tests.browser.page_checks import (ARTIFACTS, MEASURE, SLOW_MS, blocking_violations,
                                       close_sidebar, failures, figure_problems,
                                       formula_problems, main_figure_problems, open_presenting,
                                       present_from_sidebar, settle, unfocusable_controls)
from tests.browser.page_checks import page  # noqa: F401 (the fixture)
from tests.browser_support import NO_PLOTLY_ON_OPEN, PAGES, visit

# The main figure of a page opened with the default model, checked for its fit on the screen:
# the chart key's CSS class, or "" for the page's first figure.
MAIN_FIGURES = {
    "": "st-key-maps_heatmap",
    "all_heads": "",
    "cross_attention": "",
    "head_statistics": "st-key-stats_grid",
    "rollout": "st-key-rollout_rolled",
    "causal_masks": "st-key-masks_side_by_side",
    "scaling": "",
}
DECODER = "?text=The%20capital%20of%20France%20is&model=decoder"
# (page, heading, main figure) of the pages whose main figure needs the causal decoder
DECODER_PAGES = [
    ("all_heads", "All heads at once", "st-key-all_mosaic"),  # 30 layers x 9 heads: layers across
    ("predictions", "What the model predicts", "st-key-pred_next"),
    ("generation", "Generation, one token at a time", ""),
]

# Pages whose presenter layout does not hold yet, and why; each must still show a problem (so a
# fix shows up here as a failure to be recorded), every other page none.
KNOWN: dict[str, str] = {}


@pytest.mark.parametrize("path, heading", PAGES, ids=[path or "home" for path, _ in PAGES])
def test_the_page_passes_axe_in_both_themes_and_holds_its_presenter_layout(app_url, page, path,
                                                                           heading):
    name = path or "attention_maps"
    visit(page, app_url, path, heading)
    assert page.get_by_label("Sentence", exact=True).count() == 1, f"no sidebar on /{path}"
    if path not in NO_PLOTLY_ON_OPEN:  # its figures drawn, not only the first thing on the page
        page.locator('[data-testid="stPlotlyChart"] .main-svg').first.wait_for(timeout=SLOW_MS)
    settle(page)
    problems = blocking_violations(page, f"/{path} light")
    light, named = figure_problems(page, f"/{path} light")
    problems += named + unfocusable_controls(page, f"/{path}") + failures(page, f"/{path} light")
    problems += [f"{name} light: {problem}" for problem in page.evaluate(MEASURE)]  # as it opens

    present_from_sidebar(page, figures=light)  # the same figures, drawn again
    problems += blocking_violations(page, f"/{path} presenter")
    presented, named = figure_problems(page, f"/{path} presenter")
    problems += named + failures(page, f"/{path} presenter")

    close_sidebar(page)
    figures = page.locator(".js-plotly-plot").count()
    layout = page.evaluate(MEASURE)
    if layout:
        (ARTIFACTS / "layout").mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "layout" / f"{name}.png"))
    if name in KNOWN:
        assert layout, f"{name} holds now: remove it from KNOWN"
    else:
        problems += [f"{name}: {problem}" for problem in layout]
    problems += formula_problems(page, f"/{path} presenter, sidebar closed")
    if path in MAIN_FIGURES:
        problems += main_figure_problems(page, MAIN_FIGURES[path], f"/{path} presenter",
                                         ARTIFACTS / "presenter" / f"{name}.png")
    problems += failures(page, f"/{path} presenter, sidebar closed")

    assert problems == [], "\n".join(problems)
    if path not in NO_PLOTLY_ON_OPEN:
        assert light >= 1 and presented >= light, (light, presented)
    assert (figures >= 1) != (path in NO_PLOTLY_ON_OPEN), f"/{path} drew {figures} figures"
    assert page.outside_requests == []


@pytest.mark.parametrize("path, heading, main", DECODER_PAGES, ids=[p[0] for p in DECODER_PAGES])
def test_the_decoders_main_figure_fits_a_1280x720_screen_in_presenter_mode(app_url, page, path,
                                                                           heading, main):
    open_presenting(page, app_url, path + DECODER, heading)
    close_sidebar(page)
    problems = main_figure_problems(page, main, f"/{path} decoder presenter",
                                    ARTIFACTS / "presenter" / f"{path}.png")
    problems += failures(page, f"/{path} decoder presenter")
    assert problems == [], "\n".join(problems)
    assert page.outside_requests == []
