"""Start: from `streamlit run` to the first heatmap painted, against the bare imports.

Usage: .venv/bin/python bench/bench_start.py [--repeats 3]

One side is the wall time of a fresh `python -c "import torch, transformers, streamlit"`; the
others start `streamlit run server.py` (what start.sh serves: ui/serving.py loads the default
model as the server starts) and `streamlit run app.py` (the same app without it) on a free
loopback port and, in a fresh context of one headless Chromium (launched before the clock
starts, as a lecturer's browser is open), open the app as soon as the server answers and stop
the clock when the attention heatmap is painted. The sides are interleaved, each repeated;
prints every time, the medians and each server's ratio to the bare imports against the goal of
2. Everything stays on loopback.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser_support import _free_port, launch_chromium  # noqa: E402

GOAL = 2.0
START_TIMEOUT_S = 120
HEATMAP_TIMEOUT_MS = 120_000
BARE = "import torch, transformers, streamlit"
# the heatmap is painted: a plot whose first trace is a heatmap with its rows drawn
PAINTED = """() => [...document.querySelectorAll('.js-plotly-plot')].some(plot =>
    plot.data && plot.data[0] && plot.data[0].type === 'heatmap'
    && plot.querySelector('.hm, image, .heatmaplayer'))"""


def bare_imports() -> float:
    """Seconds for a fresh interpreter to import torch, transformers and streamlit."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", BARE], check=True, cwd=ROOT)
    return time.perf_counter() - started


def _answering(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


SCRIPTS = ("server.py", "app.py")


def start_to_heatmap(browser, script: str) -> float:
    """Seconds from `streamlit run script` to the default page's heatmap painted in a fresh
    context."""
    port = _free_port()
    command = [sys.executable, "-m", "streamlit", "run", str(ROOT / script),
               "--server.headless", "true", "--server.address", "127.0.0.1",
               "--server.port", str(port), "--browser.gatherUsageStats", "false"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    url = f"http://127.0.0.1:{port}"
    context = browser.new_context()
    page = context.new_page()
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        while not _answering(url):
            if process.poll() is not None:
                raise RuntimeError(f"streamlit exited with code {process.returncode}")
            if time.perf_counter() - started > START_TIMEOUT_S:
                raise RuntimeError(f"streamlit did not answer within {START_TIMEOUT_S} s")
            time.sleep(0.05)
        page.goto(url)
        page.wait_for_function(PAINTED, timeout=HEATMAP_TIMEOUT_MS, polling=50)
        return time.perf_counter() - started
    finally:
        context.close()
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    bare: list[float] = []
    served: dict[str, list[float]] = {script: [] for script in SCRIPTS}
    with launch_chromium() as browser:
        for repeat in range(args.repeats):  # interleaved: bare, each script, bare, ...
            bare.append(bare_imports())
            for script in SCRIPTS:
                served[script].append(start_to_heatmap(browser, script))
            print(f"repeat {repeat + 1}: bare imports {bare[-1]:.2f} s, " + ", ".join(
                f"streamlit run {script} to heatmap {times[-1]:.2f} s"
                for script, times in served.items()), flush=True)
    bare_s = statistics.median(bare)
    print(f"median bare `{BARE}`: {bare_s:.2f} s")
    for script, times in served.items():
        ratio = statistics.median(times) / bare_s
        print(f"median `streamlit run {script}` to the first heatmap: "
              f"{statistics.median(times):.2f} s, ratio {ratio:.2f} (goal at most {GOAL:.0f}): "
              f"{'met' if ratio <= GOAL else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
