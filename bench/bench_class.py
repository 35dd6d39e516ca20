"""A class on one server: 30 sessions opening the same link, the server's time per session.

Usage: .venv/bin/python bench/bench_class.py [--sessions 30] [--repeats 2]

Serves app.py with ATTENTION_EXPLORER_TIMING_LOG set (ui/timing.py: every script run logs its
session, wall time and the CPU time of the thread that ran it) and opens one link, the attention
maps of a sentence at a chosen layer and head, in fresh contexts of one headless Chromium. The
link is opened once first (its trace and figures computed), then, interleaved and repeated: one
session alone, and N sessions at once. A session's server time is the sum of its script runs;
CPU time is the server's own work for it, wall time also counts waiting for the cores the other
sessions use. Prints one session alone, the median and slowest of N, and the ratio of the
medians' CPU times against the goal of 2.

Last, session B opens a link that starts a long computation (the decoder on a new text of a few
hundred tokens, all heads) and, while it runs, a session opens the cached link: its server wall
time against the cached view's alone shows whether B's computation blocks it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from urllib.parse import quote

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser_support import launch_chromium, served_app, wait_idle  # noqa: E402

GOAL = 2.0
WAIT_MS = 600_000
SENTENCE = "The students open the same link at the start of the lecture."
LINK = f"/?text={quote(SENTENCE)}&layer=2&head=5"
LONG_TEXT = " ".join(f"Sentence {index} of the long reading is about rivers and bridges."
                     for index in range(30))
LONG_LINK = f"/all_heads?text={quote(LONG_TEXT)}&model=decoder"
PAINTED = """() => [...document.querySelectorAll('.js-plotly-plot')].some(plot =>
    plot.data && plot.data[0] && plot.data[0].type === 'heatmap'
    && plot.layout && plot.layout.title && String(plot.layout.title.text).includes('Head 5'))"""


def logged(log: Path, since: int) -> tuple[dict[str, dict[str, float]], int]:
    """Each session's summed wall and CPU seconds in the log's lines after line `since`."""
    lines = log.read_text().splitlines() if log.exists() else []
    sessions: dict[str, dict[str, float]] = defaultdict(lambda: {"wall_s": 0.0, "cpu_s": 0.0,
                                                                  "runs": 0})
    for line in lines[since:]:
        run = json.loads(line)
        totals = sessions[run["session"]]
        totals["wall_s"] += run["wall_s"]
        totals["cpu_s"] += run["cpu_s"]
        totals["runs"] += 1
    return dict(sessions), len(lines)


def open_link(browser, url: str, count: int, link: str = LINK) -> list:
    """`count` fresh contexts opening `link` at once; waits until each has painted and is idle."""
    contexts = [browser.new_context(viewport={"width": 1200, "height": 900}) for _ in range(count)]
    pages = [context.new_page() for context in contexts]
    for page in pages:
        page.goto(url + link, wait_until="commit")
    for page in pages:
        page.wait_for_function(PAINTED, timeout=WAIT_MS, polling=100)
        wait_idle(page, WAIT_MS)
    return contexts


def phase(browser, url: str, log: Path, since: int, count: int) -> tuple[list[dict], int]:
    contexts = open_link(browser, url, count)
    time.sleep(1.0)  # the last run's line is written after its last message
    sessions, since = logged(log, since)
    for context in contexts:
        context.close()
    return list(sessions.values()), since


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    alone: list[dict] = []
    together: list[dict] = []
    with tempfile.TemporaryDirectory() as folder, launch_chromium() as browser:
        log = Path(folder) / "timing.jsonl"
        with served_app(ATTENTION_EXPLORER_TIMING_LOG=str(log)) as url:
            _, since = phase(browser, url, log, 0, 1)  # computes the trace and the figures
            for repeat in range(args.repeats):
                one, since = phase(browser, url, log, since, 1)
                many, since = phase(browser, url, log, since, args.sessions)
                alone.extend(one)
                together.extend(many)
                print(f"repeat {repeat + 1}: alone cpu {one[0]['cpu_s']:.3f} s wall "
                      f"{one[0]['wall_s']:.3f} s; {args.sessions} at once median cpu "
                      f"{statistics.median(s['cpu_s'] for s in many):.3f} s, sessions logged "
                      f"{len(many)}", flush=True)
            # a long computation in session B while a session opens the cached link
            long_context = browser.new_context()
            long_page = long_context.new_page()
            long_page.goto(url + LONG_LINK, wait_until="commit")
            time.sleep(3.0)  # B's run is under way (its forward takes tens of seconds here)
            during, since = phase(browser, url, log, since, 1)
            long_page.locator(".js-plotly-plot").first.wait_for(timeout=WAIT_MS)
            wait_idle(long_page, WAIT_MS)
            long_context.close()
    cpu_alone = statistics.median(s["cpu_s"] for s in alone)
    wall_alone = statistics.median(s["wall_s"] for s in alone)
    cpu_many = statistics.median(s["cpu_s"] for s in together)
    wall_many = statistics.median(s["wall_s"] for s in together)
    print(f"one session alone, server time per session: cpu {cpu_alone:.3f} s, "
          f"wall {wall_alone:.3f} s (median of {len(alone)})")
    print(f"{args.sessions} sessions at once, per session: median cpu {cpu_many:.3f} s "
          f"(slowest {max(s['cpu_s'] for s in together):.3f} s), median wall {wall_many:.3f} s "
          f"(slowest {max(s['wall_s'] for s in together):.3f} s); "
          f"runs per session {statistics.median(s['runs'] for s in together):.0f}")
    ratio = cpu_many / cpu_alone
    print(f"ratio (cpu per session, {args.sessions} at once / alone) {ratio:.2f} "
          f"(goal at most {GOAL:.0f}): {'met' if ratio <= GOAL else 'NOT met'}")
    cached = during[0] if during else {"wall_s": float("nan"), "cpu_s": float("nan")}
    print(f"the cached link opened during another session's long computation: wall "
          f"{cached['wall_s']:.3f} s, cpu {cached['cpu_s']:.3f} s "
          f"(alone: wall {wall_alone:.3f} s, {cached['wall_s'] / wall_alone:.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
