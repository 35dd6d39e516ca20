"""Accessibility in the real browser: axe-core (axe-playwright-python, the axe.min.js inside its
wheel, nothing fetched) finds no serious or critical violation on any page, in the light theme
and in presenter mode, with the top menu and the sidebar's panels open too; every figure has a
text alternative (its title and what it shows); every control of a page takes the keyboard's
focus; and the keyboard alone drives the sidebar and a page's slider to a new figure."""

from __future__ import annotations

import re
from urllib.parse import urlparse

import pytest
from axe_playwright_python.sync_playwright import Axe

from tests.app_support import GUARD_MESSAGE
from tests.browser_support import NO_PLOTLY_ON_OPEN, PAGES, guard_requests, visit, wait_idle
from viz.palettes import contrast_ratio

VIEWPORT = {"width": 1280, "height": 720}  # a projector's screen
BLOCKING = ("serious", "critical")
SLOW_MS = 240_000  # the first decoder or translator use on a machine prepares it
MAX_TABS = 80  # a control further than this many Tab presses away counts as unreachable
MIN_CONTRAST = 4.5  # WCAG 2 AA for text
PAPER = "#ffffff"  # the figures' background
PRESENTER_STYLE = "html { font-size: 18px; }"  # ui/state.py's PRESENTER_CSS is on the page

AXE = Axe()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport=VIEWPORT)
    tab = context.new_page()
    tab.outside_requests = guard_requests(tab)
    yield tab
    context.close()


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


def open_by_menu(page, path: str) -> None:
    """Go to the page at `path` by the top bar's menus, in the same session (its settings stay)."""
    sections = page.locator('[data-testid="stTopNavSection"]')
    for index in range(sections.count()):
        sections.nth(index).click()
        links = page.locator('[data-testid="stTopNavDropdownLink"]')
        links.first.wait_for(timeout=10_000)
        for link in links.all():
            if urlparse(link.get_attribute("href") or "").path.strip("/") == path:
                link.click()
                return
        page.keyboard.press("Escape")
    raise AssertionError(f"no menu link to /{path}")


@pytest.mark.parametrize("path, heading", PAGES, ids=[path or "home" for path, _ in PAGES])
def test_the_page_passes_axe_in_both_themes_with_named_figures(app_url, page, path, heading):
    """Light: the page opened by its address, the sidebar's sentence box beside it. Presenter
    mode: opened by its link with `present=true`, as a prepared slide opens. Neither shows an
    exception or app.py's guard message."""
    visit(page, app_url, path, heading)
    assert page.get_by_label("Sentence", exact=True).count() == 1, f"no sidebar on /{path}"
    if path not in NO_PLOTLY_ON_OPEN:  # its figures drawn, not only the first thing on the page
        page.locator('[data-testid="stPlotlyChart"] .main-svg').first.wait_for(timeout=SLOW_MS)
    settle(page)
    problems = blocking_violations(page, f"/{path} light")
    light, named = figure_problems(page, f"/{path} light")
    problems += named + unfocusable_controls(page, f"/{path}") + failures(page, f"/{path} light")

    separator = "&" if "?" in path else "?"
    page.goto(f"{app_url}/{path}{separator}present=true")
    page.get_by_role("heading", name=heading).first.wait_for(timeout=SLOW_MS)
    settle(page)
    page.wait_for_function("""count => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
        .filter(chart => chart.querySelector('.main-svg')).length >= count""", arg=light,
                           timeout=SLOW_MS)  # the same figures as in the light theme, drawn
    settle(page)
    assert page.evaluate("text => [...document.querySelectorAll('style')].some(s => "
                         "s.textContent.includes(text))", PRESENTER_STYLE), path
    problems += blocking_violations(page, f"/{path} presenter")
    presented, named = figure_problems(page, f"/{path} presenter")
    problems += named + failures(page, f"/{path} presenter")
    assert problems == [], "\n".join(problems)
    if path not in NO_PLOTLY_ON_OPEN:
        assert light >= 1 and presented >= light, (light, presented)
    assert page.outside_requests == []


def test_the_panels_pass_axe_and_presenter_mode_follows_the_menu(app_url, page):
    """The panels that open (the sidebar's model panel, the top bar's menus) pass axe-core;
    presenter mode switched on in the sidebar stays on for a page opened by the menu, as a
    lecturer would go, and that page passes too."""
    visit(page, app_url, PAGES[0][0], PAGES[0][1])
    settle(page)
    page.get_by_text("Use another pretrained model", exact=True).click()
    page.get_by_label("Hugging Face model id or local folder").wait_for()
    problems = blocking_violations(page, "sidebar model panel open")
    sections = page.locator('[data-testid="stTopNavSection"]')
    for index in range(sections.count()):
        sections.nth(index).click()
        page.locator('[data-testid="stTopNavDropdownLink"]').first.wait_for(timeout=10_000)
        problems += blocking_violations(page, f"top menu {index} open")
        page.keyboard.press("Escape")

    page.get_by_text("Presenter mode", exact=True).click()
    wait_idle(page, SLOW_MS)
    path, heading = next(entry for entry in PAGES if entry[0] == "head_statistics")
    open_by_menu(page, path)
    page.get_by_role("heading", name=heading).first.wait_for(timeout=SLOW_MS)
    settle(page)
    assert page.evaluate("text => [...document.querySelectorAll('style')].some(s => "
                         "s.textContent.includes(text))", PRESENTER_STYLE)
    problems += blocking_violations(page, f"/{path} presenter by the menu")
    figures, named = figure_problems(page, f"/{path} presenter by the menu")
    assert problems + named == [], "\n".join(problems + named)
    assert figures >= 1
    assert page.outside_requests == []


def tab_to(page, accept: str) -> int:
    """Press Tab until the focused element satisfies the JavaScript predicate `accept` (given
    the element); returns the number of presses."""
    for presses in range(1, MAX_TABS + 1):
        page.keyboard.press("Tab")
        if page.evaluate(f"() => ({accept})(document.activeElement)"):
            return presses
    raise AssertionError(f"{accept} not reached in {MAX_TABS} Tab presses")


def test_the_keyboard_alone_drives_the_sidebar_and_a_pages_slider(app_url, page):
    """From the top of the attention maps page: Tab to the sentence box, type a new sentence and
    apply it (Ctrl+Enter), see the map's labels change; Tab on to the page's first slider (the
    layer), press the right arrow, see the map of the next layer; Tab to the presenter switch
    and press Space. No mouse anywhere."""
    visit(page, app_url, PAGES[0][0], PAGES[0][1])
    settle(page)
    heatmap = page.locator(".st-key-maps_heatmap .js-plotly-plot")
    assert heatmap.locator(".gtitle").text_content() == "Layer 0 · Head 0"

    tab_to(page, "e => e.tagName === 'TEXTAREA' && e.getAttribute('aria-label') === 'Sentence'")
    page.keyboard.press("Control+A")
    page.keyboard.type("Fruit flies like a banana.")
    page.keyboard.press("Control+Enter")
    heatmap.locator(".xtick text", has_text="banana").first.wait_for(timeout=60_000)
    settle(page)

    tab_to(page, "e => e.closest('[data-testid=\"stMain\"]') && (e.getAttribute('role') === "
                 "'slider' || e.type === 'range')")
    assert page.evaluate("() => document.activeElement.getAttribute('aria-label') || "
                         "document.activeElement.labels?.[0]?.textContent") == "Layer"
    page.keyboard.press("ArrowRight")
    page.wait_for_function("""() => document.querySelector(
        '.st-key-maps_heatmap .js-plotly-plot .gtitle')?.textContent === 'Layer 1 · Head 0'""",
                           timeout=60_000)
    settle(page)
    assert "banana" in heatmap.locator(".xtick").all_text_contents()

    tab_to(page, "e => e.getAttribute('role') === 'switch' && e.closest('label')?.textContent"
                 ".includes('Presenter mode')")
    page.keyboard.press("Space")
    page.wait_for_function("text => [...document.querySelectorAll('style')].some(s => "
                           "s.textContent.includes(text))", arg=PRESENTER_STYLE, timeout=60_000)
    assert page.outside_requests == []
