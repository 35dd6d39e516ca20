"""A cached view: from opening its link to the painted figure, against Streamlit's own floor.

Usage: .venv/bin/python bench/bench_cached_view.py [--repeats 5]

Serves app.py and bench/floor_app.py (a page drawing one small Plotly figure, computing nothing)
side by side on loopback. Each view's link is opened once first, so its trace and figures are
kept. Then, interleaved and repeated, each of floor, Attention maps and All heads is opened in a
fresh context of one headless Chromium: the time runs from `goto` to the view's figure painted
(the heatmap of the head the link names, drawn large on both pages). The websocket bytes the browser received until the
page is idle are set against the figures' own JSON (the Plotly specs inside those messages).
Prints the medians, the ratio of each view to the floor (goal at most 1.15) and of its bytes to
its figures' JSON (goal at most 2).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import quote

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser_support import launch_chromium, served_app, wait_idle  # noqa: E402

TIME_GOAL = 1.15
BYTES_GOAL = 2.0
WAIT_MS = 300_000
SENTENCE = "The cat sat on the mat because it was warm."
# what each view waits for: a heatmap whose title names it
PAINTED = """title => [...document.querySelectorAll('.js-plotly-plot')].some(plot =>
    plot.data && plot.data[0] && plot.data[0].type === 'heatmap'
    && plot.querySelector('.heatmaplayer') && plot.layout && plot.layout.title
    && String(plot.layout.title.text || '').includes(title))"""
VIEWS = {  # name: (server, link, title to wait for)
    "floor": ("floor", "/", "Floor"),
    "Attention maps": ("app", f"/?text={quote(SENTENCE)}&layer=3&head=7", "Head 7"),
    "All heads": ("app", f"/all_heads?text={quote(SENTENCE)}&layer=3&head=7", "Head 7"),
}


def figure_json_bytes(payload: bytes) -> int:
    """The bytes of the Plotly specs (`{"data": …}` JSON) inside one websocket message."""
    total, start = 0, payload.find(b'{"data":')
    decoder = json.JSONDecoder()
    while start >= 0:
        text = payload[start:].decode("utf-8", errors="replace")
        try:
            _, length = decoder.raw_decode(text)
        except json.JSONDecodeError:
            length = 0
        consumed = len(text[:length].encode("utf-8"))
        total += consumed
        start = payload.find(b'{"data":', start + max(consumed, 1))
    return total


def open_view(browser, url: str, link: str, title: str) -> tuple[float, int, int]:
    """(seconds from goto to painted, websocket bytes received until idle, figures' JSON bytes)
    in a fresh context."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    received: list[bytes] = []

    def watch(socket) -> None:
        socket.on("framereceived", lambda frame: received.append(
            frame if isinstance(frame, bytes) else frame.encode("utf-8")))

    page.on("websocket", watch)
    try:
        started = time.perf_counter()
        page.goto(url + link, wait_until="commit")
        page.wait_for_function(PAINTED, arg=title, timeout=WAIT_MS, polling=20)
        seconds = time.perf_counter() - started
        wait_idle(page, WAIT_MS)
        return (seconds, sum(len(frame) for frame in received),
                sum(figure_json_bytes(frame) for frame in received))
    finally:
        context.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in VIEWS}
    sizes: dict[str, tuple[int, int]] = {}
    with served_app() as app, served_app(ROOT / "bench" / "floor_app.py") as floor, \
            launch_chromium() as browser:
        urls = {"app": app, "floor": floor}
        for server, link, title in VIEWS.values():  # computed once: the views are cached
            open_view(browser, urls[server], link, title)
        for repeat in range(args.repeats):
            for name, (server, link, title) in VIEWS.items():
                seconds, socket_bytes, figure_bytes = open_view(browser, urls[server], link,
                                                                title)
                times[name].append(seconds)
                sizes[name] = (socket_bytes, figure_bytes)
            print(f"repeat {repeat + 1}: " + ", ".join(f"{name} {values[-1]:.2f} s"
                                                      for name, values in times.items()),
                  flush=True)
    floor_s = statistics.median(times["floor"])
    print(f"floor (one small Plotly figure): median {floor_s:.2f} s")
    for name in VIEWS:
        if name == "floor":
            continue
        median = statistics.median(times[name])
        socket_bytes, figure_bytes = sizes[name]
        ratio, byte_ratio = median / floor_s, socket_bytes / max(figure_bytes, 1)
        print(f"{name}: median {median:.2f} s, ratio to the floor {ratio:.2f} (goal at most "
              f"{TIME_GOAL}): {'met' if ratio <= TIME_GOAL else 'NOT met'}; websocket "
              f"{socket_bytes:,} B against its figures' JSON {figure_bytes:,} B, ratio "
              f"{byte_ratio:.2f} (goal at most {BYTES_GOAL:.0f}): "
              f"{'met' if byte_ratio <= BYTES_GOAL else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
