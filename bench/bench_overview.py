"""The all-heads view against bertviz's model view, side by side in one run.

Usage: .venv/bin/python bench/bench_overview.py [--sizes 64 128 512] [--timeout 120]

For the embedded default model (6 layers x 12 heads) at each size it prints:
(a) bytes: what the app's "All heads at once" page sends for its figures (the mosaic and the
    enlarged head), against bertviz's model_view HTML as bertviz ships it (full precision,
    CDN scripts), and against our offline, rounded build of it;
(b) time in headless Chromium from submitting the sentence to the view being painted:
    - all heads: the served app; the sentence typed into the sidebar until the mosaic and the
      enlarged head (with the new tokens) are drawn;
    - bertviz: the model run plus bertviz building its HTML in Python, then Chromium loading
      that page (bertviz's own full-precision data, with the scripts inlined so it runs offline)
      until every attention line of every thumbnail is in the SVG; given up after --timeout.
Goals: at 128 tokens (a) <= 1/20 and (b) >= 5x faster; at 512 the all-heads view paints in
under 5 s.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import bertviz  # noqa: E402
import torch  # noqa: E402

from bench.bench_record import text_of  # noqa: E402
from models.analysis.thumbnails import thumbnails  # noqa: E402
from models.loading.pretrained import DEFAULT_MODEL, load_pretrained  # noqa: E402
from models.loading.kinds import PRETRAINED
from models.loading.source import ModelSource  # noqa: E402
from tests.browser_support import launch_chromium, served_app, set_sidebar_text, wait_idle  # noqa: E402
from viz import bertviz_views  # noqa: E402
from viz.heatmap import attention_heatmap  # noqa: E402
from viz.overview import all_heads_figure  # noqa: E402


FRESH_WORDS = ("house", "river", "music", "garden", "window")  # one WordPiece token each


def overview_bytes(record) -> int:
    figures = (all_heads_figure(thumbnails(record), (0, 0)), attention_heatmap(record, 0, 0))
    return sum(len(figure.to_json().encode()) for figure in figures)


def bertviz_shipped_html(record) -> str:
    tensors = [torch.tensor(layer)[None] for layer in record.weights]  # L x (1, H, Q, K)
    return bertviz.model_view(tensors, list(record.tokens), html_action="return").data


def time_app(browser, url: str, text: str, first_word: str) -> float:
    page = browser.new_page(viewport={"width": 1400, "height": 1600})
    page.goto(f"{url}/all_heads")
    page.get_by_role("heading", name="All heads at once").wait_for(timeout=120_000)
    wait_idle(page, 120_000)
    start = time.perf_counter()
    set_sidebar_text(page, text)
    page.wait_for_function(
        """word => {
            const plots = document.querySelectorAll('.js-plotly-plot');
            if (plots.length < 2 || !plots[0].querySelector('.heatmaplayer image')) return false;
            const rows = plots[1].data && plots[1].data[0].y;  // "token #position" labels
            return !!rows && rows[1] === word + ' #1'
                && !!plots[1].querySelector('.heatmaplayer image');
        }""", arg=first_word, timeout=120_000, polling=50)
    elapsed = time.perf_counter() - start
    page.close()
    return elapsed


def time_bertviz(browser, runner, text: str, timeout_s: float) -> tuple[float | None, int]:
    start = time.perf_counter()
    record = runner.run(text).record
    html = bertviz_views._offline_page(bertviz_shipped_html(record), "model_view.js")
    lines = record.num_layers * record.num_heads * record.num_tokens ** 2
    page = browser.new_page(viewport={"width": 1400, "height": 1600})
    try:
        page.set_content(html, timeout=timeout_s * 1000)
        remaining = max(1.0, timeout_s - (time.perf_counter() - start))
        page.wait_for_function(
            "n => document.querySelectorAll('#vis svg line').length >= n", arg=lines,
            timeout=remaining * 1000, polling=250)
        return time.perf_counter() - start, len(html.encode())
    except Exception:  # noqa: BLE001 - a timeout or a crashed tab both mean "did not finish"
        return None, len(html.encode())
    finally:
        page.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 512])
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    loaded = load_pretrained(DEFAULT_MODEL)
    runner = ModelSource(PRETRAINED, DEFAULT_MODEL).load(pretrained=lambda name: loaded)
    rows = []
    with served_app() as url, launch_chromium() as browser:
        for size in args.sizes:
            base = text_of(loaded.tokenizer, size)
            record = runner.run(base).record
            ours = overview_bytes(record)
            shipped = len(bertviz_shipped_html(record).encode())
            offline = len(bertviz_views.model_view_html(record).encode())
            word = FRESH_WORDS[len(rows) % len(FRESH_WORDS)]  # a new input: no answer from a cache
            text = f"{word} {base}"
            app_s = time_app(browser, url, text, word)
            bert_s, _ = time_bertviz(browser, runner, text, args.timeout)
            rows.append((size, ours, shipped, offline, app_s, bert_s))
            print(f"measured {size} tokens", flush=True)
    print(f"\nmodel: {DEFAULT_MODEL}; bertviz timeout {args.timeout:.0f} s")
    print(f"{'tokens':>6} {'all-heads B':>12} {'bertviz B':>12} {'(a) ratio':>9} "
          f"{'offline bv B':>12} {'all-heads s':>11} {'bertviz s':>10} {'(b) speed-up':>12}")
    for size, ours, shipped, offline, app_s, bert_s in rows:
        speed = f"{bert_s / app_s:>11.1f}x" if bert_s else "   not done"
        bert = f"{bert_s:>10.1f}" if bert_s else f"{'> ' + str(int(args.timeout)):>10}"
        print(f"{size:>6} {ours:>12,} {shipped:>12,} {f'1/{shipped / ours:.0f}':>9} "
              f"{offline:>12,} {app_s:>11.2f} {bert} {speed:>12}")


if __name__ == "__main__":
    main()
