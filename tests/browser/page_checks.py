"""What the browser tests check on a page as it is drawn (tests/browser/test_browser_pages.py and
test_browser_accessibility.py): axe-core's serious and critical violations (axe-playwright-python,
the axe.min.js inside its wheel, nothing fetched), figures named by their text alternative with
readable text, controls the keyboard reaches, an exception or app.py's guard message, and, in
presenter mode, the layout of every figure's text and the fit of a page's main figure.

Text is measured as it is drawn: each SVG text element's own box (getBBox) mapped through its
transform to the screen (getScreenCTM), so a rotated tick label is the slanted rectangle it
covers, not the upright box around it; two texts overlap when the rectangles intersect by more
than a sliver (separating-axis test).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from axe_playwright_python.sync_playwright import Axe

from tests.app_support import GUARD_MESSAGE
from tests.browser_support import wait_idle
from viz.palettes import contrast_ratio

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
VIEWPORT = {"width": 1280, "height": 720}  # a projector's screen
BLOCKING = ("serious", "critical")
SLOW_MS = 240_000  # the first decoder or translator use on a machine prepares it
MIN_CONTRAST = 4.5  # WCAG 2 AA for text
PRESENTER_PX = 18  # presenter mode's smallest text
PAPER = "#ffffff"  # the figures' background
PRESENTER_STYLE = "html { font-size: 18px; }"  # ui/state.py's PRESENTER_CSS is on the page
OVERLAP_PX = 2.0  # rectangles that share less than this much depth only touch
OUTSIDE_PX = 1.0

AXE = Axe()


def blocking_violations(page, where: str) -> list[str]:
    """axe-core's serious and critical violations on the page as it is now, one line per node."""
    results = AXE.run(page)
    return [f"{where}: {violation['id']} ({violation['impact']}) at {node['target']}: "
            f"{node['failureSummary'].splitlines()[-1].strip()}"
            for violation in results.response["violations"] if violation["impact"] in BLOCKING
            for node in violation["nodes"]]


def settle(page) -> None:
    """Wait until the script is idle, every figure on the page has drawn and the page's formula
    script (ui/accessibility.py) runs: on a fresh load Streamlit may mount it after the rest."""
    wait_idle(page, SLOW_MS)
    page.wait_for_function("() => window.__explorerFormulas === true", timeout=SLOW_MS)
    page.wait_for_function("""() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
        .every(chart => chart.querySelector('.main-svg'))""", timeout=SLOW_MS)


def formula_problems(page, where: str) -> list[str]:
    """Display formulas wider than their column, or drawn under presenter mode's text size to fit
    it (ui/accessibility.py draws a wide one smaller, within limits, then lets it scroll): on a
    projector a formula's cut-off part is simply missing."""
    shown = page.evaluate("""() => [...document.querySelectorAll('.katex-display')]
        .filter(formula => formula.getClientRects().length > 0)
        .map(formula => [formula.querySelector('annotation')?.textContent ?? '',
                         formula.scrollWidth, formula.clientWidth,
                         parseFloat(getComputedStyle(formula.querySelector('.katex')).fontSize)])""")
    return [f"{where}: the formula {source[:50]!r} is {width} px wide in a {room}-px column, "
            f"its text {size:.1f} px" for source, width, room, size in shown
            if width > room or size < PRESENTER_PX]


def presenting(page) -> bool:
    """Presenter mode's style is on the page."""
    return page.evaluate("text => [...document.querySelectorAll('style')].some(s => "
                         "s.textContent.includes(text))", PRESENTER_STYLE)


def failures(page, where: str) -> list[str]:
    """An exception box or app.py's guard message on the page as it is now."""
    found = []
    if page.locator('[data-testid="stException"]').count():
        found.append(f"{where}: an exception is shown")
    if page.get_by_text(GUARD_MESSAGE).count():
        found.append(f"{where}: app.py's guard message is shown")
    return found


def squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text or "")


def figure_problems(page, where: str) -> tuple[int, list[str]]:
    """Every Plotly figure is a `figure` named by its text alternative, which starts with the
    title it draws; its text (axes, legends, colour bars, notes: not what is written on cells
    and bars, over their colour) has WCAG AA contrast on the white paper (axe-core does not
    check SVG text); every embedded frame (bertviz) has a title. Returns (figures, problems)."""
    charts = page.evaluate("""() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
        .map(chart => ({role: chart.getAttribute('role'), name: chart.getAttribute('aria-label'),
                        title: chart.querySelector('.gtitle')?.textContent ?? ''}))""")
    problems = [f"{where}: figure {index} role {chart['role']!r} name {chart['name']!r}"
                for index, chart in enumerate(charts)
                if chart["role"] != "figure" or not (chart["name"] or "").strip()
                or not squeezed(chart["name"]).startswith(squeezed(chart["title"]))
                or len(squeezed(chart["name"])) <= len(squeezed(chart["title"]))]
    texts = page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot svg text')]
        .filter(text => text.textContent.trim() && !text.closest('g.trace'))
        .map(text => {  // the fill as drawn on white: its alpha and the text's opacity blended
            const style = getComputedStyle(text);
            const [r, g, b, a = 1] = style.fill.match(/[\\d.]+/g).map(Number);
            const alpha = a * Number(style.fillOpacity) * Number(style.opacity);
            const [R, G, B] = [r, g, b].map(c => Math.round(c * alpha + 255 * (1 - alpha)));
            return [`rgb(${R}, ${G}, ${B})`, text.textContent];
        })""")
    problems += [f"{where}: figure text {text!r} in {fill} has contrast "
                 f"{contrast_ratio(fill, PAPER):.2f} on white" for fill, text in texts
                 if contrast_ratio(fill, PAPER) < MIN_CONTRAST]
    frames = page.evaluate("""() => [...document.querySelectorAll('[data-testid="stMain"] iframe')]
        .map(frame => frame.getAttribute('title') || '')""")
    problems += [f"{where}: an embedded frame without a title" for title in frames
                 if not title.strip()]
    return len(charts), problems


def unfocusable_controls(page, where: str) -> list[str]:
    """Widgets in the page that the Tab key would skip: none of the enabled controls inside the
    widget takes the focus. (Within a widget, one stop is the pattern: a radio group's checked
    button, a number box rather than its +/- buttons, a select box rather than its arrow.)"""
    skipped = page.evaluate("""() => {
        const controls = [...document.querySelectorAll('[data-testid="stMain"] :is(input, '
            + 'textarea, select, button, a[href], [role="slider"], [role="switch"], '
            + '[role="combobox"], [role="tab"], summary)')]
            .filter(control => !control.disabled && control.getAttribute('aria-disabled') !== 'true'
                    && control.getClientRects().length > 0);
        const widgets = new Map();
        for (const control of controls) {
            const widget = control.closest('.stElementContainer') || control;
            widgets.set(widget, [...(widgets.get(widget) || []), control]);
        }
        return [...widgets.entries()]
            .filter(([widget, inside]) => inside.every(control => control.tabIndex < 0))
            .map(([widget, inside]) => widget.innerText.trim().slice(0, 60)
                                       || inside[0].getAttribute('aria-label') || widget.tagName);
    }""")
    return [f"{where}: the keyboard cannot reach {name!r}" for name in skipped]


def open_presenting(page, url: str, path: str, heading: str, figures: int = 0) -> None:
    """Open the page by its link with `present=true`, as a prepared slide opens (the link sets the
    same session setting as the sidebar's switch, ui/link_codec.py), and wait until at least
    `figures` figures have drawn and presenter mode's style is on the page."""
    separator = "&" if "?" in path else "?"
    page.goto(f"{url}/{path}{separator}present=true")
    page.get_by_role("heading", name=heading).first.wait_for(timeout=SLOW_MS)
    settle(page)
    if _drawn(page) < figures:  # more still to come: wait for them, then for the page again
        page.wait_for_function(f"() => ({DRAWN})() >= {int(figures)}", timeout=SLOW_MS)
        settle(page)
    assert presenting(page), f"/{path}: presenter mode's style is not on the page"


DRAWN = """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
    .filter(chart => chart.querySelector('.main-svg')).length"""


def _drawn(page) -> int:
    """How many of the page's Plotly figures have drawn."""
    return page.evaluate(DRAWN)


def present_from_sidebar(page, figures: int = 0) -> None:
    """Turn presenter mode on with the sidebar's switch, as a lecturer does in front of the class
    (from the keyboard: a click could land elsewhere while the sidebar redraws), and wait until
    its style is on the page and at least `figures` figures have drawn again."""
    switch = page.get_by_role("switch", name="Presenter mode")
    switch.focus()
    page.keyboard.press("Space")
    page.wait_for_function("text => [...document.querySelectorAll('style')].some(s => "
                           "s.textContent.includes(text))", arg=PRESENTER_STYLE, timeout=SLOW_MS)
    settle(page)
    page.wait_for_function(f"() => ({DRAWN})() >= {int(figures)}", timeout=SLOW_MS)
    # the switch itself is out of sight now (presenter mode folds the sidebar): the link says it
    page.wait_for_function("() => new URLSearchParams(location.search).get('present') === 'true'",
                           timeout=SLOW_MS)


def close_sidebar(page) -> None:
    """Collapse the sidebar, as a lecturer does before presenting, and wait until the figures
    have drawn again at the width this leaves them."""
    if page.locator('[data-testid="stSidebar"][data-collapsed="false"]').count():
        page.locator('[data-testid="stSidebar"]').hover()
        page.locator('[data-testid="stSidebarCollapseButton"] button').click()
        page.locator('[data-testid="stExpandSidebarButton"]').wait_for()
    page.wait_for_timeout(700)  # the sidebar's closing transition; figures then resize
    page.wait_for_function("""() => [...document.querySelectorAll('.js-plotly-plot')]
        .every(p => p.querySelector('.main-svg'))""", timeout=SLOW_MS)
    wait_idle(page, SLOW_MS)


def main_figure_problems(page, main: str, where: str, screenshot: Path) -> list[str]:
    """The page's main figure (the chart key's CSS class `main`, or "" for the page's first
    figure), brought on screen as a deck's slide does, lies wholly inside the 1280 x 720 screen
    and draws its title and tick labels, like the page's text, at presenter mode's size or more.
    A screenshot of it goes to `screenshot`."""
    chart = page.locator(f".{main} .js-plotly-plot" if main else ".js-plotly-plot").first
    chart.wait_for(timeout=SLOW_MS)
    chart.locator(".main-svg").first.wait_for(timeout=SLOW_MS)
    wait_idle(page, SLOW_MS)
    chart.evaluate("chart => chart.scrollIntoView({block: 'center'})")
    page.wait_for_timeout(300)
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(screenshot))
    box = chart.bounding_box()
    problems = []
    if box is None or box["width"] <= 200 or box["height"] <= 150:
        problems.append(f"{where}: the main figure is not drawn at a readable size: {box}")
    else:
        if box["x"] < 0 or box["y"] < 0:
            problems.append(f"{where}: the main figure starts off the screen: {box}")
        if box["x"] + box["width"] > VIEWPORT["width"]:
            problems.append(f"{where}: the main figure leaves the screen's right edge: {box}")
        if box["y"] + box["height"] > VIEWPORT["height"]:
            problems.append(f"{where}: the main figure leaves the screen's bottom edge: {box}")
    sizes = page.evaluate(
        """chart => [...chart.querySelectorAll('.xtick text, .ytick text, .gtitle')]
            .map(t => parseFloat(getComputedStyle(t).fontSize))""", chart.element_handle())
    if not sizes or min(sizes) < PRESENTER_PX:
        problems.append(f"{where}: the main figure's title and tick labels are not all "
                        f"{PRESENTER_PX} px or more: {sizes}")
    body = page.evaluate("""() => parseFloat(getComputedStyle(
        document.querySelector('[data-testid="stMain"] [data-testid="stMarkdownContainer"] p')
        || document.body).fontSize)""")
    if body < PRESENTER_PX:
        problems.append(f"{where}: the page's text is {body} px, under {PRESENTER_PX}")
    return problems


# Every figure's texts as screen quadrilaterals, and what is wrong with them.
MEASURE = """() => {
  const corners = (text) => {
    const box = text.getBBox(), matrix = text.getScreenCTM();
    if (!matrix || box.width === 0 || box.height === 0) return null;
    return [[box.x, box.y], [box.x + box.width, box.y], [box.x + box.width, box.y + box.height],
            [box.x, box.y + box.height]].map(([x, y]) => [
      matrix.a * x + matrix.c * y + matrix.e, matrix.b * x + matrix.d * y + matrix.f]);
  };
  const depth = (first, second) => {  // how far two convex quads overlap (0: apart)
    let least = Infinity;
    for (const quad of [first, second]) {
      for (let i = 0; i < 4; i++) {
        const [x1, y1] = quad[i], [x2, y2] = quad[(i + 1) % 4];
        const length = Math.hypot(x2 - x1, y2 - y1);
        if (length === 0) continue;
        const axis = [(y1 - y2) / length, (x2 - x1) / length];
        const project = (q) => q.map(([x, y]) => x * axis[0] + y * axis[1]);
        const a = project(first), b = project(second);
        const overlap = Math.min(Math.max(...a), Math.max(...b))
                      - Math.max(Math.min(...a), Math.min(...b));
        if (overlap <= 0) return 0;
        least = Math.min(least, overlap);
      }
    }
    return least;
  };
  const visible = (element) => {
    for (let node = element; node && node.tagName !== 'svg'; node = node.parentNode) {
      const style = getComputedStyle(node);
      if (style.display === 'none' || style.visibility === 'hidden' || style.opacity === '0')
        return false;
    }
    return true;
  };
  const describe = (text) => {
    const group = text.closest('[class]:not(text)');
    return `${group ? group.getAttribute('class').split(' ')[0] : 'text'} '${
      text.textContent.trim().slice(0, 40)}'`;
  };
  const problems = [];
  const screen = window.innerWidth;
  for (const plot of document.querySelectorAll('.js-plotly-plot')) {
    const frame = plot.getBoundingClientRect();
    if (frame.width === 0) continue;
    const title = (plot.querySelector('.gtitle') || {}).textContent || '(untitled)';
    const where = `figure '${title.slice(0, 60)}'`;
    if (frame.right > screen + 1 || frame.left < -1)
      problems.push(`${where} is ${Math.round(frame.width)} px wide, past the screen`);
    const texts = [...plot.querySelectorAll('svg.main-svg text')]
      .filter(t => t.textContent.trim() && !t.closest('.hoverlayer, .trace, .textpoint')
                   && visible(t))
      .map(t => ({text: t, quad: corners(t)})).filter(t => t.quad);
    for (const {text, quad} of texts) {
      const xs = quad.map(p => p[0]), ys = quad.map(p => p[1]);
      if (Math.min(...xs) < frame.left - OUTSIDE_PX || Math.max(...xs) > frame.right + OUTSIDE_PX
          || Math.min(...ys) < frame.top - OUTSIDE_PX || Math.max(...ys) > frame.bottom + OUTSIDE_PX)
        problems.push(`${where}: ${describe(text)} leaves the figure`);
    }
    for (let i = 0; i < texts.length; i++)
      for (let j = i + 1; j < texts.length; j++)
        if (depth(texts[i].quad, texts[j].quad) > OVERLAP_PX)
          problems.push(`${where}: ${describe(texts[i].text)} overlaps ${describe(texts[j].text)}`);
  }
  for (const frame of document.querySelectorAll('[data-testid="stMain"] iframe')) {
    const box = frame.getBoundingClientRect();
    if (box.width && box.right > screen + 1)
      problems.push(`an embedded view is ${Math.round(box.width)} px wide, past the screen`);
  }
  return problems;
}""".replace("OUTSIDE_PX", str(OUTSIDE_PX)).replace("OVERLAP_PX", str(OVERLAP_PX))


@pytest.fixture
def page(shared_tab):
    """A 1280 x 720 tab whose requests leaving the machine are listed in `tab.outside_requests`
    (to be empty): the test process's shared tab (tests/conftest.py)."""
    shared_tab.set_viewport_size(VIEWPORT)
    return shared_tab
