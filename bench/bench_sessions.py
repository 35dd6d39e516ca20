"""Many students at once: N browser sessions on one served app, against one session alone.

Usage: .venv/bin/python bench/bench_sessions.py [--sessions 30]

Each session opens the attention maps page and types its own sentence (so none is answered
from another's cache); the time is from the first keystroke to its heatmap showing its own
first word. Prints one session alone, then the median and slowest of N at once, and their
ratios. Everything stays on loopback.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.browser_support import launch_chromium, served_app, wait_idle  # noqa: E402

WORDS = ("house river music garden window table winter summer doctor teacher school market "
         "letter bridge forest island animal camera corner dinner office palace village "
         "battle castle chapter engine flower mirror planet rocket").split()
PAINTED = """word => {
    const plot = document.querySelector('.js-plotly-plot');
    const rows = plot && plot.data && plot.data[0].y;
    return !!rows && rows[1] === word + ' #1';
}"""


def open_sessions(browser, url: str, count: int) -> list:
    pages = []
    for _ in range(count):
        page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
        page.goto(f"{url}/")
        pages.append(page)
    for page in pages:
        page.get_by_role("heading", name="Attention maps").wait_for(timeout=300_000)
        wait_idle(page, 300_000)
    return pages


def run_round(pages, words: list[str]) -> list[float]:
    starts = []
    for page, word in zip(pages, words, strict=True):
        box = page.get_by_label("Sentence", exact=True)
        box.fill(f"{word} flies like an arrow while students watch")
        starts.append(time.perf_counter())
        box.press("Control+Enter")
    times = []
    for page, word, start in zip(pages, words, starts, strict=True):
        page.wait_for_function(PAINTED, arg=word, timeout=300_000, polling=100)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=30)
    args = parser.parse_args()
    if args.sessions > len(WORDS) - 1:
        parser.error(f"at most {len(WORDS) - 1} sessions")
    with served_app() as url, launch_chromium() as browser:
        alone = run_round(open_sessions(browser, url, 1), WORDS[:1])[0]
        pages = open_sessions(browser, url, args.sessions)
        together = run_round(pages, WORDS[1:args.sessions + 1])
    median, slowest = statistics.median(together), max(together)
    print(f"one session alone:            {alone:6.2f} s")
    print(f"{args.sessions} sessions at once, median: {median:6.2f} s  ({median / alone:4.1f}x alone)")
    print(f"{args.sessions} sessions at once, slowest:{slowest:6.2f} s  ({slowest / alone:4.1f}x alone)")


if __name__ == "__main__":
    main()
