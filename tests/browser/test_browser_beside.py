"""Pages whose choices sit in a column beside their main figure open on that figure: in presenter
mode on a 1280 x 720 screen it is wholly on the first screen, before any scrolling (the choices
beside it, every token pill in view, no label cut short), no text of the page's figures overlaps
another's (the logit lens's rank axis once labelled 6 to 9 on top of each other), the
attribution's bar chart names every bar, and a layer x head map fills the column (30 layers of
square cells left 13 px a head and its labels crowded)."""

from __future__ import annotations

import pytest

from tests.browser.page_checks import MEASURE, VIEWPORT, close_sidebar, open_presenting
from tests.browser.test_browser import assert_clean, page  # noqa: F401 (fixture)

# The pages (on the causal decoder, with the link's other settings), their heading, their main
# figure's chart key and how many figures they draw; a grid of one layer's 9 heads is the
# shortest (its rows once overlapped their labels).
BESIDE = [("", "Attention maps", "maps_heatmap", "", 2),
          ("logit_attribution", "Direct logit attribution", "dla_heads", "", 2),
          ("activation_patching", "Activation patching", "patch_grid", "", 2),
          ("activation_patching", "Activation patching", "patch_grid", "&site=head_position", 2),
          ("logit_lens", "Logit lens", "lens_map", "", 2),
          ("head_detectors", "Head detectors", "detectors_map", "&kind=induction", 1),
          ("row_arithmetic", "One attention row, step by step", "arith_steps", "", 3),
          ("positions", "Positions", "positions_sinusoid", "", 3),
          ("adaptive_span", "Adaptive attention span", "span_ramp_chart", "", 1),
          ("compare", "Compare two inputs", "compare_grid", "", 3),
          ("scaling", "Why attention is scaled", "scaling_dots", "", 2),
          ("attention_cost", "The n² cost of attention", "cost_flops", "", 1)]


@pytest.mark.parametrize(("path", "heading", "key", "more", "figures"), BESIDE,
                         ids=["maps", "attribution", "patching", "patching-heads-of-a-layer",
                              "lens", "detectors", "one-row", "positions", "span",
                              "compare", "scaling", "cost"])
def test_the_page_opens_on_its_map_in_presenter_mode(app_url, page, path, heading, key, more,
                                                     figures):
    page.set_viewport_size(VIEWPORT)
    open_presenting(page, app_url, f"{path}?model=decoder{more}", heading, figures=figures)
    shown = page.locator(f".st-key-{key} .js-plotly-plot").bounding_box()
    assert shown is not None and shown["height"] > 300, shown
    assert shown["y"] >= 0 and shown["y"] + shown["height"] <= VIEWPORT["height"], shown
    for pills in page.locator('[data-testid="stButtonGroup"]').all():  # wrapped, none hidden
        assert pills.evaluate("group => [...group.querySelectorAll('button')].every(button => "
                              "button.getBoundingClientRect().right <= "
                              "group.getBoundingClientRect().right + 1)"), pills.inner_text()
    cut = page.evaluate("""() => [...document.querySelectorAll('.stMain *')].filter(element =>
        getComputedStyle(element).textOverflow === 'ellipsis'
        && element.scrollWidth > element.clientWidth + 1).map(element => element.textContent)""")
    assert cut == [], cut  # no label cut short with "…" in the narrow column
    if path == "logit_attribution":  # its bar chart names every bar at presenter size
        chart = page.locator(".st-key-dla_bars .js-plotly-plot")
        bars = chart.evaluate("plot => plot.data[0].y.length")
        names = chart.locator(".ytick text").all_text_contents()
        assert bars == 12 and len(names) == bars, names  # the slider's default: 12 parts
    close_sidebar(page)
    if path == "head_detectors":  # a layer x head map fills the column: 9 heads across it
        across = page.locator(f".st-key-{key} .js-plotly-plot").evaluate(  # [px a head, heads]
            "plot => [Math.abs(plot._fullLayout.xaxis._m), new Set([...plot.querySelectorAll("
            "'.xtick text')].map(label => label.textContent)).size]")
        assert across[1] == 9 and across[0] >= 40, across  # square cells: 13 px a head
    assert page.evaluate(MEASURE) == []  # no text of a figure overlapping another's
    assert_clean(page)
