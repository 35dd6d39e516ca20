"""Serving the real app with `streamlit run` and driving it in headless Chromium (Playwright)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
# Every request to a host other than this machine's loopback goes to a proxy on a port where
# nothing listens, so it fails at once and leaves nothing (loopback bypasses it); the tests list
# such requests (`guard_requests`) and expect none. (Playwright's request routing would
# also abort them, but routing turns the browser's cache off: every page opened in a test then
# fetched and compiled Streamlit's and Plotly's scripts again, a third more of Chromium's time.)
OUTSIDE_PROXY = {"server": "http://127.0.0.1:9", "bypass": "127.0.0.1,localhost,[::1]"}
START_TIMEOUT_S = 90
SKELETON_PATIENCE_MS = 15_000  # a skeleton this long after the run is not a part loading
# (url path, heading to wait for): every page of app.py's navigation
PAGES = [
    ("", "Attention maps"),
    ("all_heads", "All heads at once"),
    ("bertviz_views", "bertviz views"),
    ("row_arithmetic", "One attention row, step by step"),
    ("head_statistics", "Head statistics"),
    ("rollout", "Attention rollout"),
    ("compare", "Compare two inputs"),
    ("causal_masks", "Causal and padding masks"),
    ("adaptive_span", "Adaptive attention span"),
    ("scaling", "Why attention is scaled"),
    ("positions", "Positions"),
    ("predictions", "What the model predicts"),
    ("generation", "Generation, one token at a time"),
    ("cross_attention", "Cross-attention: an encoder–decoder translating"),
    ("head_finder", "Head finder"),
    ("head_detectors", "Head detectors"),
    ("ablation", "Ablation and knockout"),
    ("activation_patching", "Activation patching"),
    ("logit_lens", "Logit lens"),
    ("logit_attribution", "Direct logit attribution"),
    ("encoder_layer", "Inside one encoder layer"),
    ("fine_tuning", "Fine-tuning a classifier"),
    ("corpus", "Corpus: every head over many passages"),
    ("masked_lm", "Masked words: how BERT is pretrained"),
    ("neuron_view", "bertviz neuron view"),
    ("attention_cost", "The n² cost of attention"),
    ("lessons", "Lessons"),
]
# Pages that open without a Plotly figure: bertviz's drawings in a frame, or a figure that waits
# for the user (a head to choose, a button to press); every other page draws one when opened.
NO_PLOTLY_ON_OPEN = {"bertviz_views", "neuron_view", "predictions", "head_finder", "ablation",
                     "activation_patching", "logit_lens", "logit_attribution", "masked_lm"}


def missing_chromium_message() -> str | None:
    if not Path(CHROMIUM).exists() and not shutil.which(CHROMIUM):
        return (f"Chromium is missing at {CHROMIUM}: install Debian's 'chromium' package "
                "(./test.sh does) or set CHROMIUM to its path.")
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_app(script: Path | None = None, **environment: str) -> tuple[subprocess.Popen, str]:
    """Start `streamlit run server.py` (what start.sh serves: app.py with ui/serving.py) or
    `script` on loopback, with `environment` added to this process's, and wait until it answers;
    returns the process and its URL."""
    port = _free_port()
    command = [sys.executable, "-m", "streamlit", "run", str(script or ROOT / "server.py"),
               "--server.headless", "true", "--server.address", "127.0.0.1",
               "--server.port", str(port), "--browser.gatherUsageStats", "false"]
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", **environment)
    url = f"http://127.0.0.1:{port}"
    (ROOT / "artifacts").mkdir(exist_ok=True)  # the server's log, kept to read after a failure
    log = open(app_log(url), "w")
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until_it_answers(process, url)
    except BaseException:
        stop_app(process.pid)
        raise
    return process, url


def wait_until_it_answers(process: subprocess.Popen, url: str,
                          timeout_s: float = START_TIMEOUT_S) -> None:
    """Wait until the Streamlit server `process` answers its health check at `url`; a
    RuntimeError if it exits first or does not answer within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"streamlit exited with code {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"streamlit did not answer within {timeout_s:.0f} s")
        time.sleep(0.3)


def stop_app(pid: int) -> None:
    """Stop a served app (SIGTERM, then SIGKILL after 15 s), whoever started it."""
    try:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG) != (0, 0):
                    return  # this process's child, reaped
            os.kill(pid, 0)  # raises once another process's child has gone
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@contextlib.contextmanager
def served_app(script: Path | None = None, **environment: str):
    """A served app of this test's own (see `start_app`); yields its URL and stops it."""
    process, url = start_app(script, **environment)
    try:
        yield url
    finally:
        stop_app(process.pid)
    failures = logged_failures(app_log(url))
    assert not failures, f"the served app logged exceptions: {failures}"


def app_log(url: str) -> Path:
    """The log of the app served at `url` (`start_app` writes artifacts/streamlit-<port>.log)."""
    return ROOT / "artifacts" / f"streamlit-{urlparse(url).port}.log"


def logged_failures(log: Path, start: int = 0) -> list[str]:
    """The exceptions a served app logged after byte `start` of its log (app.py's guard logs a
    page's as "page <title> failed" and shows the user a sentence, which a browser test that has
    moved on would not see), each as the line before its traceback and the exception's line."""
    with open(log, "rb") as file:
        file.seek(start)
        lines = file.read().decode(errors="replace").splitlines()
    failures = []
    for index, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)"):
            before = lines[index - 1].strip() if index else ""
            raised = next((later for later in lines[index + 1:]
                           if later and not later[0].isspace()), "")
            failures.append(f"{before} -> {raised}")
    return failures


def shared_app_url(record: Path) -> str:
    """The URL of the one app served for every test process of a run: the first process to ask
    starts it and writes `record` (its URL and process id); the others read it. The pytest process
    that created `record`'s folder stops it at the end of the run (tests/conftest.py). Every
    browser test opens its own Streamlit sessions, so they share the server as a class does, and a
    view one process computed is cached for the other."""
    with open(record.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if record.exists():
            return json.loads(record.read_text())["url"]
        process, url = start_app()
        record.write_text(json.dumps({"url": url, "pid": process.pid}))
        return url


def stop_shared_app(record: Path) -> None:
    """Stop the run's shared app, if a test process started one (`shared_app_url`)."""
    if record.exists():
        stop_app(json.loads(record.read_text())["pid"])


@contextlib.contextmanager
def launch_chromium():
    from playwright.sync_api import sync_playwright

    message = missing_chromium_message()
    if message:
        raise RuntimeError(message)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                             proxy=OUTSIDE_PROXY)
        try:
            yield browser
        finally:
            browser.close()


def is_local(url: str) -> bool:
    parsed = urlparse(url)
    if parsed.scheme in ("data", "blob", "about", "chrome-error"):
        return True
    return parsed.hostname in ("127.0.0.1", "localhost", "::1")


def guard_requests(page) -> list[str]:
    """The list of the tab's requests (web sockets included) to a host other than this machine's
    loopback, kept up to date; the browser fails them (OUTSIDE_PROXY)."""
    outside: list[str] = []

    def record(url: str) -> None:
        if not is_local(url):
            outside.append(url)

    page.on("request", lambda request: record(request.url))
    page.on("websocket", lambda socket: record(socket.url))
    return outside


class ProcessChromium:
    """One headless Chromium for a test process's browser tests, and one tab they share, started
    when a test first asks and closed before a test that does not use them (tests/conftest.py).
    The browser tests run first, one after another on each pytest-xdist worker, alternating
    between modules: a Chromium and a tab per module meant a launch (1.4 s of processor time) and
    a new tab's first page (3.5 s more than the same tab's next one) about twenty times per
    worker. It is closed before the other tests because Playwright's sync API holds an event
    loop while it lives, which asyncio code in those tests cannot share; a browser test among
    them starts it again.

    The shared tab starts each test with its storage cleared and no request listed outside
    (`tab.outside_requests`); a test that fails leaves it closed, so the next starts afresh."""

    def __init__(self) -> None:
        self._stack: contextlib.ExitStack | None = None
        self._browser = None
        self._tab = None

    def browser(self):
        """The process's Chromium, launched now if it is not running."""
        if self._browser is None:
            stack = contextlib.ExitStack()
            self._browser = stack.enter_context(launch_chromium())
            self._stack = stack
        return self._browser

    def tab(self):
        """The shared tab, ready for a new test: a 1280 x 720 tab of its own context whose
        requests leaving the machine fail and are listed in `tab.outside_requests`."""
        if self._tab is None or self._tab.is_closed():
            tab = self.browser().new_context().new_page()
            tab.outside_requests = guard_requests(tab)
            self._tab = tab
        elif self._tab.url.startswith("http"):  # the last test's page: forget what it stored
            self._tab.evaluate("() => { localStorage.clear(); sessionStorage.clear(); }")
        self._tab.outside_requests.clear()
        return self._tab

    def drop_tab(self, screenshot: Path | None = None) -> None:
        """Close the shared tab (after a failure: the next test opens a new one), first saving
        what it showed to `screenshot`, if given, whole page."""
        if self._tab is not None:
            tab, self._tab = self._tab, None
            with contextlib.suppress(Exception):  # a browser that died has closed it already
                if screenshot is not None and not tab.is_closed():
                    screenshot.parent.mkdir(parents=True, exist_ok=True)
                    tab.screenshot(path=str(screenshot), full_page=True, timeout=15_000)
                tab.context.close()

    def close(self) -> None:
        """Close the tab and Chromium, if running."""
        self.drop_tab()
        if self._stack is not None:
            stack, self._stack, self._browser = self._stack, None, None
            stack.close()


def set_sidebar_text(page, text: str) -> None:
    box = page.get_by_label("Sentence", exact=True)
    box.fill(text)
    box.press("Control+Enter")


def wait_idle(page, timeout_ms: int = 60_000) -> None:
    """Wait until Streamlit has finished running the script: the app root's script state reads
    "notRunning" and stays so for 200 ms, and no element still shows its loading skeleton (a
    lazily loaded part, such as Plotly's, shows one for seconds in a fresh browser after the
    script is done) unless one stays for SKELETON_PATIENCE_MS. (The status widget is no signal:
    the app's toolbarMode = "minimal" never shows it.)"""
    page.wait_for_timeout(300)
    page.wait_for_function(
        """patience => {
            const app = document.querySelector('[data-testid="stApp"]');
            if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') {
                window.__explorerIdleSince = undefined;
                return false;
            }
            window.__explorerIdleSince = window.__explorerIdleSince || performance.now();
            const idle = performance.now() - window.__explorerIdleSince;
            const loading = document.querySelector('[data-testid="stSkeleton"]') !== null;
            return idle > 200 && (!loading || idle > patience);
        }""", arg=SKELETON_PATIENCE_MS, timeout=timeout_ms, polling=100)


def switch_on(page, switch, attempts: int = 3) -> None:
    """Turn a Streamlit toggle on from the keyboard (focus, then Space) until its switch reads
    as on. A key press reaches the switch it focused or nothing; a mouse click computed on a
    sidebar that is being redrawn could land on another control (the model's radio buttons sit
    just above this one). A press lost to a redraw is tried again."""
    from playwright.sync_api import expect

    for _ in range(attempts):
        switch.focus()
        page.keyboard.press("Space")
        try:
            expect(switch).to_be_checked(timeout=15_000)
            return
        except AssertionError:
            wait_idle(page, 60_000)
    expect(switch).to_be_checked(timeout=1_000)


def visit(page, url: str, path: str, heading: str, text: str | None = None) -> None:
    page.goto(f"{url}/{path}")
    page.get_by_role("heading", name=heading).first.wait_for(timeout=90_000)
    if text is not None:
        set_sidebar_text(page, text)
    wait_idle(page)
    page.locator('.js-plotly-plot, iframe, [data-testid="stAlert"]').first.wait_for(timeout=90_000)
