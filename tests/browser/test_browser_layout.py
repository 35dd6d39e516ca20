"""Presenter layouts hold at a projector's 1280 x 720: every page, opened by a link in presenter
mode with the sidebar closed, draws no figure wider than the screen, and no text of a Plotly figure
(titles, axis titles, tick labels, legends, annotations, colour bars) leaves its figure or
overlaps another.

Text is measured as it is drawn: each SVG text element's own box (getBBox) mapped through its
transform to the screen (getScreenCTM), so a rotated tick label is the slanted rectangle it
covers, not the upright box around it; two texts overlap when the rectangles intersect by more
than a sliver (separating-axis test). One test per page (pytest-xdist spreads them).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app_support import GUARD_MESSAGE
from tests.browser_support import NO_PLOTLY_ON_OPEN, PAGES, guard_requests, wait_idle

SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "layout"
VIEWPORT = {"width": 1280, "height": 720}
SLOW_MS = 240_000  # the first decoder or translator use on a machine prepares it
OVERLAP_PX = 2.0  # rectangles that share less than this much depth only touch
OUTSIDE_PX = 1.0

# Pages whose presenter layout does not hold yet, and why; each must still show a problem (so a
# fix shows up here as a failure to be recorded), every other page none.
KNOWN: dict[str, str] = {}

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


def _open_presenting(page, url: str, path: str, heading: str) -> None:
    separator = "&" if "?" in path else "?"
    page.goto(f"{url}/{path}{separator}present=true")
    page.wait_for_load_state()
    page.get_by_role("heading", name=heading).first.wait_for(timeout=SLOW_MS)
    wait_idle(page, SLOW_MS)
    if page.locator('[data-testid="stSidebar"][data-collapsed="false"]').count():
        page.locator('[data-testid="stSidebar"]').hover()
        page.locator('[data-testid="stSidebarCollapseButton"] button').click()
        page.locator('[data-testid="stExpandSidebarButton"]').wait_for()
    page.wait_for_timeout(700)  # the sidebar's closing transition; figures then resize
    page.wait_for_function("""() => [...document.querySelectorAll('.js-plotly-plot')]
        .every(p => p.querySelector('.main-svg'))""", timeout=SLOW_MS)


@pytest.mark.parametrize("path, heading", PAGES, ids=[path or "home" for path, _ in PAGES])
def test_every_page_in_presenter_mode_keeps_its_text_inside_and_apart(app_url, browser, path,
                                                                       heading):
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    outside = guard_requests(page)
    name = path or "attention_maps"
    try:
        _open_presenting(page, app_url, path, heading)
        page.wait_for_function("""() => [...document.querySelectorAll('style')]
            .some(s => s.textContent.includes('html { font-size: 18px; }'))""", timeout=30_000)
        if path not in NO_PLOTLY_ON_OPEN:  # a run the presenter link started may still draw
            page.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=SLOW_MS)
            wait_idle(page, SLOW_MS)
        assert page.locator('[data-testid="stException"]').count() == 0, name
        assert page.get_by_text(GUARD_MESSAGE).count() == 0, name
        figures = page.locator(".js-plotly-plot").count()
        problems = page.evaluate(MEASURE)
        if problems:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
    finally:
        context.close()
    assert (figures >= 1) != (path in NO_PLOTLY_ON_OPEN), f"/{path} drew {figures} figures"
    assert outside == []
    if name in KNOWN:
        assert problems, f"{name} holds now: remove it from KNOWN"
    else:
        assert problems == [], "\n".join(f"{name}: {problem}" for problem in problems)
