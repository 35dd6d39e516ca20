"""A warmed deck's slides paint at once: each slide of a shipped deck, opened in a fresh browser
context (a new session, as a student's link or the next slide after a reload), from the request
to its main figure drawn and the script finished.

Usage: .venv/bin/python bench/bench_deck.py [--deck chapter-3 ...] [--budget 2.0]

The app is served once; each deck is warmed with the deck page's own button (as a lecturer would
before class) and then every slide is timed at 1280 x 720. Prints one line per slide, the
slowest, and whether every slide was under the budget (exit status 1 if not).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from urllib.parse import quote

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from models.teaching.decks import read_deck  # noqa: E402
from tests.browser_support import guard_requests, launch_chromium, served_app, wait_idle  # noqa: E402
from ui.decks import DECKS, slide_pages  # noqa: E402

VIEWPORT = {"width": 1280, "height": 720}
WARM_TIMEOUT_MS = 20 * 60_000  # training the translator and the classifier on a busy machine
SLIDE_TIMEOUT_MS = 120_000
BUDGET_S = 2.0


def warm(browser, url: str, name: str) -> float:
    page = browser.new_context(viewport=VIEWPORT).new_page()
    guard_requests(page)
    page.goto(f"{url}/deck?choice={quote(name)}")
    page.get_by_role("heading", name="Slide decks").wait_for(timeout=SLIDE_TIMEOUT_MS)
    wait_idle(page, SLIDE_TIMEOUT_MS)
    start = time.perf_counter()
    page.locator(".st-key-deck_warm button").first.click()  # a rerun may still show the old one
    page.get_by_text("Warmed up").wait_for(timeout=WARM_TIMEOUT_MS)
    seconds = time.perf_counter() - start
    page.context.close()
    return seconds


def paint(browser, url: str, view: str, figure: str) -> float:
    """Seconds from opening `view` in a new session to its main figure drawn and the run
    finished."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    outside = guard_requests(page)
    target = f".st-key-{figure} .main-svg" if figure else \
        ".js-plotly-plot .main-svg, [data-testid='stIFrame'], iframe"
    start = time.perf_counter()
    page.goto(f"{url}/{view}")
    page.locator(target).first.wait_for(timeout=SLIDE_TIMEOUT_MS)
    wait_idle(page, SLIDE_TIMEOUT_MS)
    seconds = time.perf_counter() - start - 0.5  # wait_idle's own 300 + 200 ms of quiet
    context.close()
    if outside:
        raise RuntimeError(f"{view} asked for {outside[0]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--deck", action="append",
                        help="a deck's file name in decks/ without .toml (default: every deck)")
    parser.add_argument("--budget", type=float, default=BUDGET_S)
    args = parser.parse_args()
    names = args.deck or [path.stem for path in sorted(DECKS.glob("*.toml"))]
    pages = slide_pages()
    slowest = 0.0
    with served_app() as url, launch_chromium() as browser:
        for name in names:
            deck = read_deck((DECKS / f"{name}.toml").read_bytes(), f"{name}.toml", pages)
            print(f"{deck.title}: warmed up in {warm(browser, url, name):.1f} s", flush=True)
            for number, slide in enumerate(deck.slides, start=1):
                seconds = paint(browser, url, slide.view, slide.figure)
                slowest = max(slowest, seconds)
                print(f"  slide {number:2d} {seconds:5.2f} s  {slide.title}", flush=True)
    verdict = "every slide under" if slowest < args.budget else "NOT every slide under"
    print(f"slowest slide {slowest:.2f} s: {verdict} {args.budget:.1f} s")
    return 0 if slowest < args.budget else 1


if __name__ == "__main__":
    sys.exit(main())
