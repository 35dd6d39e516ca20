"""Memory ceiling: the served app's peak resident memory under a browser-only sequence of actions.

Usage: .venv/bin/python bench/bench_memory.py [--rounds 2]

Serves app.py with `streamlit run` on a free loopback port and drives it in headless Chromium
(Playwright, /usr/bin/chromium, offline) the way a careless classroom could: both embedded models
loaded, distinct long texts on every model with every token option, new seeds, the same folder
loaded under four spellings and other folders after it, and every export at the longest input.
The server's resident memory (its process and children, read from /proc every 0.2 s) is printed
per step and its peak against the 6 GB goal. A step the app does not offer (a label changed) is
reported as skipped, not hidden.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser import _free_port, launch_chromium, wait_idle  # noqa: E402

GOAL_BYTES = 6 * 10**9
GIB = 2**30
POLL_S = 0.2
ACTION_TIMEOUT_MS = 300_000
DOWNLOAD_TIMEOUT_MS = 90_000  # a download not received by then is reported as skipped
KIND_TITLES = ("Pretrained encoder (BERT-like)", "Pretrained causal decoder",
               "From-scratch encoder, random weights",
               "From-scratch encoder, pretrained weights copied in")
TOGGLES = ("Merge word pieces into words", "Hide special tokens")
WORDS = ("house river music garden window table winter summer doctor teacher school market "
         "letter bridge forest island animal camera corner dinner office palace village battle "
         "castle chapter engine flower mirror planet rocket students watch arrow banana").split()


def long_text(seed: int, words: int = 900) -> str:
    """Distinct text past every model's token limit (so each model runs at its limit)."""
    chooser = random.Random(seed)
    return " ".join(chooser.choice(WORDS) for _ in range(words)) + f" run{seed}."


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and its children, from /proc."""
    total = 0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            with open(f"/proc/{current}/status") as handle:
                for line in handle:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
            with open(f"/proc/{current}/task/{current}/children") as handle:
                pending.extend(int(child) for child in handle.read().split())
        except (OSError, ValueError):
            continue
    return total


class PeakMonitor:
    """Polls a process tree's resident memory in a thread; `.peak` is the largest seen."""

    def __init__(self, pid: int):
        self.pid, self.peak, self.current = pid, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.current = tree_rss(self.pid)
            self.peak = max(self.peak, self.current)
            self._stop.wait(POLL_S)

    def __enter__(self) -> "PeakMonitor":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


@contextlib.contextmanager
def serve(extra_env: dict[str, str] | None = None):
    """`streamlit run app.py` on loopback; yields (url, server pid) and stops it afterwards."""
    port = _free_port()
    command = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"),
               "--server.headless", "true", "--server.address", "127.0.0.1",
               "--server.port", str(port), "--browser.gatherUsageStats", "false"]
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", **(extra_env or {}))
    log = tempfile.NamedTemporaryFile("w", prefix="bench-streamlit-", suffix=".log", delete=False)
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"streamlit exited with code {process.returncode}; see {log.name}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        break
            if time.monotonic() > deadline:
                raise RuntimeError("streamlit did not answer within 120 s")
            time.sleep(0.3)
        yield url, process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def set_text(page, text: str) -> None:
    box = page.get_by_label("Sentence", exact=True).first
    box.fill(text)
    box.press("Control+Enter")
    wait_idle(page, ACTION_TIMEOUT_MS)


def choose_kind(page, title: str) -> None:
    page.get_by_text(title, exact=True).first.click()
    wait_idle(page, ACTION_TIMEOUT_MS)


def set_toggle(page, label: str, on: bool) -> None:
    toggle = page.get_by_role("switch", name=label).first
    if toggle.is_checked() != on:
        page.get_by_text(label, exact=True).first.click()
        wait_idle(page, ACTION_TIMEOUT_MS)


def load_folder(page, name: str) -> str:
    """Type a model name in the sidebar's loader and press Load; returns the message shown."""
    box = page.get_by_label("Hugging Face model id or local folder").first
    if not box.is_visible():
        page.get_by_text("Use another pretrained model").first.click()
    box.fill(name)
    box.press("Enter")
    page.get_by_role("button", name="Load", exact=True).click()
    wait_idle(page, ACTION_TIMEOUT_MS)
    alerts = page.locator("[data-testid='stSidebar'] [data-testid='stAlert']")
    return alerts.last.inner_text() if alerts.count() else ""


def download(page, label: str) -> int:
    """Click a download button; returns the downloaded file's size in bytes."""
    wait_idle(page, ACTION_TIMEOUT_MS)
    button = page.get_by_role("button", name=label).first
    button.wait_for(timeout=ACTION_TIMEOUT_MS)
    with page.expect_download(timeout=DOWNLOAD_TIMEOUT_MS) as info:
        button.click()
    return Path(info.value.path()).stat().st_size


def model_folders(base: Path, count: int) -> list[Path]:
    """Distinct BERT-base-sized folders (random weights, ~440 MB each, like a real download)."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from models.pretrained import default_model_path

    tokenizer = BertTokenizerFast.from_pretrained(default_model_path())
    folders = []
    for index in range(count):
        folder = base / f"model{index}"
        BertModel(BertConfig(num_hidden_layers=12 - index)).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        folders.append(folder)
    return folders


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2, help="rounds of distinct long texts")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    rows: list[tuple[str, float, float]] = []
    seed = iter(range(10**6))
    try:
        folders = model_folders(base, 3)
        with serve() as (url, pid), PeakMonitor(pid) as monitor, launch_chromium() as browser:
            page = browser.new_context(viewport={"width": 1400, "height": 1000},
                                       accept_downloads=True).new_page()

            def step(label: str, action) -> None:
                start = time.perf_counter()
                try:
                    note = action()
                except Exception as error:  # report what the app did not offer, keep going
                    note = f"skipped ({type(error).__name__}: {str(error).splitlines()[0][:80]})"
                rows.append((f"{label} {note or ''}".strip(), monitor.current, monitor.peak))
                print(f"{label:<48} {monitor.current / GIB:6.2f} GiB  peak {monitor.peak / GIB:6.2f} "
                      f"GiB  {time.perf_counter() - start:6.1f} s  {note or ''}", flush=True)

            page.goto(f"{url}/")
            page.get_by_role("heading", name="Attention maps").wait_for(timeout=ACTION_TIMEOUT_MS)
            wait_idle(page, ACTION_TIMEOUT_MS)
            step("start (MiniLM)", lambda: None)
            step("decoder loaded", lambda: choose_kind(page, KIND_TITLES[1]))
            for round_index in range(args.rounds):
                for title in KIND_TITLES:
                    step(f"r{round_index} {title[:30]}", lambda t=title: choose_kind(page, t))
                    for merge in (False, True):
                        for hide in (False, True):
                            def run(merge=merge, hide=hide):
                                set_toggle(page, TOGGLES[0], merge)
                                set_toggle(page, TOGGLES[1], hide)
                                set_text(page, long_text(next(seed)))
                            step(f"  long text merge={merge:d} hide={hide:d}", run)
            choose_kind(page, KIND_TITLES[2])
            for value in range(1, 9):
                def new_seed(value=value):
                    box = page.get_by_label("Seed")
                    box.fill(str(value))
                    box.press("Enter")
                    wait_idle(page, ACTION_TIMEOUT_MS)
                step(f"seed {value}", new_seed)
            first = folders[0]
            for spelled in (f"{first}", f"{first.parent}//{first.name}",
                            f"{first.parent}/./{first.name}", f"{first}/.", *map(str, folders[1:]),
                            f"{first}"):
                step(f"load {spelled[-40:]}", lambda s=spelled: load_folder(page, s)[:60])
            choose_kind(page, KIND_TITLES[0])
            set_toggle(page, TOGGLES[0], False)
            set_toggle(page, TOGGLES[1], False)
            for model_title in (KIND_TITLES[0], KIND_TITLES[1]):
                choose_kind(page, model_title)
                set_text(page, long_text(next(seed)))
                for label in ("Head as CSV", "Layer as JSON", "All heads as NPZ"):
                    step(f"export {label} ({model_title[:18]})",
                         lambda label=label: f"{download(page, label) / 2**20:.1f} MB")
        peak = monitor.peak
    finally:
        shutil.rmtree(base, ignore_errors=True)
    verdict = "met" if peak <= GOAL_BYTES else "NOT met"
    print(f"\npeak resident memory of the server: {peak / 10**9:.2f} GB "
          f"(goal <= {GOAL_BYTES / 10**9:.0f} GB: {verdict})")


if __name__ == "__main__":
    main()
