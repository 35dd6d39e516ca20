"""Memory ceiling: the served app's peak resident memory under a browser-only sequence of actions.

Usage: .venv/bin/python bench/bench_memory.py [--rounds 2]

Serves app.py with `streamlit run` on a free loopback port and drives it in headless Chromium
(Playwright, /usr/bin/chromium, offline) the way a careless classroom could: both embedded models
loaded, distinct long texts on every model with every token option, new seeds, the same folder
loaded under four spellings and other folders after it; then every per-input store filled with
distinct inputs through its page (ablation, knockout and the every-head grid on the decoder, head
finder, head detectors with new seeds, layer walks on long texts and from-scratch walks with new
seeds at the largest sizes, generations of new prompts and seeds, the scaling and positions
pages, toy translations); every export at the longest input (written to disk and downloaded);
last, two 4,096-token texts read whole on the decoder, with exact heads opened and every other
long-input page (rollout, detectors, compare, one row, bertviz's window, predictions, head
finder) visited on each. The server's resident memory
(its process and children, read from /proc every 0.2 s) is printed per step and its peak
against the 6 GB goal. A step that fails (a label changed, a page error, a download never
received) is printed FAILED and counted at the end; the sequence goes on.

`--sections texts,pages` runs a part of the sequence (for trying it out). The served app runs
with its default thread count even when this script runs with OMP_NUM_THREADS=1.
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

from tests.browser_support import _free_port, launch_chromium  # noqa: E402

GOAL_BYTES = 6 * 10**9
GIB = 2**30
POLL_S = 0.2
ACTION_TIMEOUT_MS = 300_000
GRID_TIMEOUT_MS = 900_000  # the every-head ablation grid on the decoder at its limit
DOWNLOAD_TIMEOUT_MS = ACTION_TIMEOUT_MS  # a download not received by then is a FAILED step
KIND_TITLES = ("Pretrained encoder (BERT-like)", "Pretrained causal decoder",
               "From-scratch encoder, random weights",
               "From-scratch encoder, pretrained weights copied in")
TOGGLES = ("Merge word pieces into words", "Hide special tokens")
WORDS = ("house river music garden window table winter summer doctor teacher school market "
         "letter bridge forest island animal camera corner dinner office palace village battle "
         "castle chapter engine flower mirror planet rocket students watch arrow banana").split()

# Whether the session's script is running, from the attribute Streamlit's frontend keeps on its
# root element: "running", "rerunRequested" and "stopRequested" while a run is under way or asked
# for, "notRunning" when it is done. (tests.browser_support.wait_idle waits for the header's status
# widget, which this app's `toolbarMode = "minimal"` never shows: it returned after its 300 ms
# pause whatever the server was doing, so a step could start while the last one still ran.)
IDLE = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    const state = app && app.getAttribute('data-test-script-state');
    return !!state && state !== 'running' && state !== 'rerunRequested'
        && state !== 'stopRequested' && state !== 'initial';
}"""


def wait_idle(page, timeout_ms: int = ACTION_TIMEOUT_MS) -> None:
    """Wait until the session's script run is finished (and stays finished for 0.2 s)."""
    page.wait_for_timeout(300)  # the last action's rerun request may still be on its way
    for _ in range(50):
        page.wait_for_function(IDLE, timeout=timeout_ms, polling=50)
        page.wait_for_timeout(200)
        if page.evaluate(IDLE):
            return
    raise RuntimeError("the script kept starting new runs for 50 rounds")



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
    # The served app uses its own default thread count even when this driver runs with
    # OMP_NUM_THREADS=1 (as it should on a shared machine): it is what is measured.
    env = {name: value for name, value in os.environ.items()
           if name not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env.update(HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", **(extra_env or {}))
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
    """Download an export; returns the file's size in bytes. A large export is written to disk
    when its "Prepare …" button is pressed (minutes on a busy server: the wait is
    ACTION_TIMEOUT_MS), then its link downloads the file from the server's static folder; a
    download that never comes raises (the step is printed as FAILED with the time waited)."""
    wait_idle(page, ACTION_TIMEOUT_MS)
    wanted = label[:1].lower() + label[1:]
    prepare = page.get_by_role("button", name=f"Prepare {wanted}")
    if prepare.count():
        prepare.first.scroll_into_view_if_needed()
        prepare.first.click()
        wait_idle(page, ACTION_TIMEOUT_MS)
    link = page.get_by_role("link", name=f"⬇ {label}").first
    link.wait_for(timeout=ACTION_TIMEOUT_MS)
    link.scroll_into_view_if_needed()
    with page.expect_download(timeout=DOWNLOAD_TIMEOUT_MS) as info:
        link.click()
    path = info.value.path()  # waits until the file is complete
    size = Path(path).stat().st_size
    with contextlib.suppress(OSError):
        Path(path).unlink()  # hundreds of MB each: do not fill the disk
    return size


ERRORS = ('[data-testid="stException"], [data-testid="stAlert"]:has-text("Something went wrong")')


def settle(page) -> None:
    """Wait for the rerun to finish; raise if the page shows a traceback or the app's last guard."""
    wait_idle(page, ACTION_TIMEOUT_MS)
    errors = page.locator(ERRORS)
    if errors.count():
        raise RuntimeError("the page shows an error: "
                           + " ".join(errors.first.inner_text().split())[:100])


def main_area(page):
    return page.locator('[data-testid="stMain"]')


def visit_page(page, link: str, heading: str) -> None:
    """Open a page by its sidebar link, in the same session (the sidebar's model and text stay;
    `page.goto` would start a new session with the defaults)."""
    nav = page.locator('[data-testid="stSidebarNav"]')
    target = nav.get_by_role("link", name=link, exact=True).first
    if not target.is_visible():
        more = nav.locator('[data-testid="stSidebarNavViewButton"]').first
        if more.is_visible() and "more" in more.inner_text():
            more.click()
    target.click()
    page.get_by_role("heading", name=heading).first.wait_for(timeout=ACTION_TIMEOUT_MS)
    settle(page)


def type_into(page, label: str, value, scope=None) -> None:
    """Fill a text or number input of the main area (by its label) and submit it with Enter."""
    box = (scope or main_area(page)).get_by_label(label, exact=True).first
    box.fill(str(value))
    box.press("Enter")
    settle(page)
    if box.input_value() != str(value):
        raise RuntimeError(f"'{label}' shows {box.input_value()!r}, not {value!r}")


def slider_to(page, label: str, key: str, presses: int = 1) -> str:
    """Move the main area's slider labelled `label` with the keyboard; returns its value."""
    slider = main_area(page).locator('[data-testid="stSlider"]').filter(
        has_text=label).get_by_role("slider").first
    slider.focus()
    for _ in range(presses):
        slider.press(key)
    settle(page)
    return slider.get_attribute("aria-valuetext") or slider.input_value()


def choose_option(page, label: str, option: str) -> None:
    """Pick `option` in the main area's selectbox labelled `label`."""
    main_area(page).locator('[data-testid="stSelectbox"]').filter(has_text=label).first.click()
    page.get_by_role("option", name=option, exact=True).first.click()
    settle(page)


def choose_radio(page, option: str) -> None:
    main_area(page).get_by_text(option, exact=True).first.click()
    settle(page)


def add_to_multiselect(page, label: str, typed: str = "") -> None:
    """Add the first option matching `typed` to the main area's multiselect labelled `label`."""
    box = main_area(page).locator('[data-testid="stMultiSelect"]').filter(has_text=label).first
    box.click()
    field = box.locator("input").first
    if typed:
        field.fill(typed)
    field.press("Enter")
    field.press("Escape")
    settle(page)


def click_button(page, name: str) -> None:
    main_area(page).get_by_role("button", name=name).first.click()
    settle(page)


def model_folders(base: Path, count: int) -> list[Path]:
    """Distinct BERT-base-sized folders (random weights, ~440 MB each, like a real download)."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from models.loading.pretrained import default_model_path

    tokenizer = BertTokenizerFast.from_pretrained(default_model_path())
    folders = []
    for index in range(count):
        folder = base / f"model{index}"
        BertModel(BertConfig(num_hidden_layers=12 - index)).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        folders.append(folder)
    return folders


SECTIONS = ("texts", "seeds", "folders", "pages", "exports", "long")
SOURCE_SENTENCES = ("the red car is fast", "she sees the green books", "the white cat is heavy",
                    "the red cars are fast", "the green book is heavy", "she sees the white cat",
                    "the heavy books are green", "the fast cat sees the red car")


def page_steps(page, url: str, step, seed) -> None:
    """Fill every per-input store through the pages: analyses (ablation, knockout, the grid,
    detectors), layer walks and their random encoders, generations, teaching pages, translations.
    Each is a step of its own; a failed one is printed FAILED and the rest go on."""
    def on_page(link: str, heading: str):
        return lambda: visit_page(page, link, heading)

    for model_title, short in ((KIND_TITLES[0], "encoder"), (KIND_TITLES[1], "decoder")):
        step(f"{short}: sidebar model", lambda t=model_title: choose_kind(page, t))
        # MiniLM has no prediction head: the ablation page only says so (nothing to store)
        for text_index in range(3 if short == "decoder" else 0):
            text = long_text(next(seed))
            step(f"{short}: ablation page, new long text {text_index}",
                 lambda text=text: (visit_page(page, "Ablation and knockout", "Ablation and knockout"),
                                    set_text(page, text), settle(page)) and None)
            def ablate(i=text_index):
                # the tab chosen last stays chosen (after the grid: "Every head alone")
                main_area(page).get_by_role("tab", name="Ablate heads").click()
                add_to_multiselect(page, "Heads to ablate", f"layer {i} · head {i}")
            step(f"  ablate one head ({short} {text_index})", ablate)
            def knockout():
                main_area(page).get_by_role("tab", name="Knock out edges").click()
                add_to_multiselect(page, "Key tokens it may no longer see", "(#1)")
            step(f"  knock out an edge ({short} {text_index})", knockout)
            if text_index == 0:
                def grid():
                    main_area(page).get_by_role("tab", name="Every head alone").click()
                    main_area(page).get_by_role("button", name="Ablate each of the").click()
                    # 270 heads at the decoder's limit: minutes on a busy 2-core machine
                    wait_idle(page, GRID_TIMEOUT_MS)
                    settle(page)
                    return f"{main_area(page).locator('.js-plotly-plot').count()} figures"
                step(f"  every head ablated alone ({short})", grid)
        step(f"{short}: head finder, new long text", lambda text=long_text(next(seed)): (
            visit_page(page, "Head finder", "Head finder"),
            set_text(page, text), settle(page),
            type_into(page, "Query token", "house"),
            type_into(page, "Key tokens (separate several with commas)", "river, music"),
            main_area(page).locator(".js-plotly-plot").first.wait_for(timeout=ACTION_TIMEOUT_MS),
        ) and None)
        step(f"{short}: head detectors, sentence", lambda: (
            visit_page(page, "Head detectors", "Head detectors"),
            choose_radio(page, "previous-token")) and None)
        step(f"{short}: induction, 50 tokens", lambda: (
            choose_radio(page, "induction"),
            slider_to(page, "Random tokens in one copy", "End")) and None)
        for value in range(1, 5):
            step(f"  induction seed {value} ({short})",
                 lambda value=value: type_into(page, "Seed", value))

    step("encoder layer page: pretrained walks",
         on_page("Inside one encoder layer", "Inside one encoder layer"))
    for text_index in range(3):
        text = long_text(next(seed))
        def walk(text=text, layer_presses=text_index):
            set_text(page, text)
            settle(page)
            if layer_presses:
                slider_to(page, "Layer", "ArrowRight", layer_presses)
        step(f"  pretrained walk, long text {text_index}", walk)
    def scratch_sizes():
        choose_radio(page, "From scratch (random weights, sizes you choose)")
        choose_option(page, "Hidden size D", "384")
        type_into(page, "Layers", 6)
        type_into(page, "Batch size B", 32)
        type_into(page, "Tokens per sentence T", 128)
    step("  from scratch: D 384, 6 layers, batch 32 x 128", scratch_sizes)
    for value in range(1, 6):
        step(f"  from-scratch walk, seed {value}",
             lambda value=value: type_into(page, "Seed", value))

    step("generation page", on_page("Generation, step by step", "Generation, one token at a time"))
    step("  100 new tokens", lambda: type_into(page, "New tokens", 100))
    def generated() -> str:
        """The generation is shown, or the page's reason why not is raised."""
        settle(page)
        shown = main_area(page).locator('[data-testid="stText"]').filter(has_text="Generated:")
        if not shown.count():
            alerts = main_area(page).locator('[data-testid="stAlert"]')
            raise RuntimeError("no generation shown: " + (
                " ".join(alerts.first.inner_text().split())[:100] if alerts.count() else "?"))
        return ""

    # 150 words (~160 tokens) plus 100 new tokens fit the decoder's token limit
    for text_index in range(3):
        prompt = long_text(next(seed), words=150)
        step(f"  greedy, new 150-word prompt {text_index}",
             lambda prompt=prompt: (set_text(page, prompt), generated()) and None)
    step("  sample", lambda: (choose_radio(page, "Sample"), generated()) and None)
    for value in range(1, 4):
        step(f"  sample, seed {value}",
             lambda value=value: (type_into(page, "Seed", value), generated()) and None)

    step("scaling page", on_page("Why attention is scaled", "Why attention is scaled"))
    step("  largest d_k", lambda: slider_to(page, "d_k, the size", "End"))
    step("  32 keys", lambda: slider_to(page, "Number of keys", "End"))
    for value in range(1, 4):
        step(f"  random draw {value}", lambda value=value: type_into(page, "Random draw (seed)", value))
    for presses in range(1, 4):
        step(f"  smaller d_k ({presses})", lambda: slider_to(page, "d_k, the size", "ArrowLeft"))

    for model_title, short in ((KIND_TITLES[0], "encoder"), (KIND_TITLES[1], "decoder")):
        step(f"positions page ({short})", lambda t=model_title: (
            visit_page(page, "Positions", "Positions"), choose_kind(page, t)) and None)
        step("  512 positions, 768 dimensions", lambda: (
            slider_to(page, "Positions", "End"),
            slider_to(page, "Dimensions (sinusoidal encoding)", "End")) and None)
        for presses in range(1, 4):
            step(f"  fewer positions ({presses})", lambda: slider_to(page, "Positions", "ArrowLeft"))

    step("cross-attention page (toy translator)",
         on_page("Cross-attention (translation)", "Cross-attention: an encoder–decoder translating"))
    for sentence in SOURCE_SENTENCES:
        step(f"  translate '{sentence[:30]}'",
             lambda sentence=sentence: type_into(page, "Source sentence (English)", sentence))


LONG_SENTENCE = "I saw a cat and a dog by the old red barn, so we ran to it."
LONG_STREAM_MS = 900_000  # 30 layers of 9 maps of 4,096 x 4,096 on two cores


# The other pages that read a long text whole: (sidebar link, heading, what to fill in first).
LONG_PAGES = (
    ("Attention rollout", "Attention rollout", {}),
    ("Head detectors", "Head detectors", {}),
    ("Compare two inputs", "Compare two inputs", {}),
    ("One row, step by step", "One attention row, step by step", {}),
    ("bertviz views", "bertviz views", {}),
    ("What the model predicts", "What the model predicts", {}),
    ("Head finder", "Head finder", {"Query token": "barn", "Key tokens": "cat, dog"}),
)


def long_page_steps(page, step) -> None:
    """Each other long-input page opened on the text just read whole: exact rows, a window of
    every layer, the predictions from the last layer's input, the query's rows in every layer."""
    for link, heading, fills in LONG_PAGES:
        def open_long(link=link, heading=heading, fills=fills):
            visit_page(page, link, heading)
            for label, text in fills.items():
                box = main_area(page).get_by_label(label).first
                box.fill(text)
                box.press("Enter")
                settle(page)
            switch = main_area(page).get_by_text("Read all 4,096 tokens").first
            switch.wait_for(timeout=ACTION_TIMEOUT_MS)
            if not main_area(page).get_by_role("switch").first.is_checked():
                switch.click()
            settle(page)
        step(f"  {link.lower()}, whole text", open_long)
    visit_page(page, "All heads at once", "All heads at once")


def long_steps(page, step) -> None:
    """Two 4,096-token texts read whole on the decoder's all-heads page (each streamed forward
    holds one layer's maps, ~1.8 GB, while it runs), then exact heads opened from them and the
    other long-input pages visited on them."""
    def open_all_heads():
        visit_page(page, "All heads at once", "All heads at once")
        choose_kind(page, KIND_TITLES[1])
    step("all heads page, decoder", open_all_heads)
    for index, opener in enumerate(("", "We ")):
        def read_whole(opener=opener):
            set_text(page, opener + " ".join([LONG_SENTENCE] * 330))
            toggle = page.get_by_role("switch", name="Read all 4,096 tokens, layer by layer")
            if not toggle.is_checked():
                page.get_by_text("Read all 4,096 tokens, layer by layer").first.click()
            main_area(page).locator(".js-plotly-plot .gtitle").filter(
                has_text="all 4096 tokens").first.wait_for(timeout=LONG_STREAM_MS)
            settle(page)
        step(f"  4,096-token text {index} read whole", read_whole)
        for key in ("End", "Home"):
            def open_head(key=key):
                return f"layer {slider_to(page, 'Layer', key)}"
            step(f"  exact head, layer slider {key}", open_head)
        long_page_steps(page, step)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2, help="rounds of distinct long texts")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"comma-separated, in this order: {','.join(SECTIONS)}")
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    if sections - set(SECTIONS):
        parser.error(f"unknown sections: {', '.join(sorted(sections - set(SECTIONS)))}")
    base = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    rows: list[tuple[str, float, float]] = []
    failed: list[str] = []
    seed = iter(range(10**6))
    try:
        folders = model_folders(base, 3) if "folders" in sections else []
        with serve() as (url, pid), PeakMonitor(pid) as monitor, launch_chromium() as browser:
            page = browser.new_context(viewport={"width": 1400, "height": 1000},
                                       accept_downloads=True).new_page()

            def step(label: str, action) -> None:
                start = time.perf_counter()
                try:
                    note = action()
                except Exception as error:  # printed as FAILED, and the sequence goes on
                    first_line = (str(error).strip().splitlines() or [""])[0]
                    note = f"FAILED ({type(error).__name__}: {first_line[:90]})"
                    failed.append(label.strip())
                    with contextlib.suppress(Exception):  # back to a usable page
                        wait_idle(page, ACTION_TIMEOUT_MS)
                rows.append((f"{label} {note or ''}".strip(), monitor.current, monitor.peak))
                print(f"{label:<48} {monitor.current / GIB:6.2f} GiB  peak {monitor.peak / GIB:6.2f} "
                      f"GiB  {time.perf_counter() - start:6.1f} s  {note or ''}", flush=True)

            page.goto(f"{url}/")
            page.get_by_role("heading", name="Attention maps").wait_for(timeout=ACTION_TIMEOUT_MS)
            wait_idle(page, ACTION_TIMEOUT_MS)
            step("start (MiniLM)", lambda: None)
            step("decoder loaded", lambda: choose_kind(page, KIND_TITLES[1]))
            for round_index in range(args.rounds if "texts" in sections else 0):
                for title in KIND_TITLES:
                    step(f"r{round_index} {title[:30]}", lambda t=title: choose_kind(page, t))
                    for merge in (False, True):
                        for hide in (False, True):
                            def run(merge=merge, hide=hide):
                                set_toggle(page, TOGGLES[0], merge)
                                set_toggle(page, TOGGLES[1], hide)
                                set_text(page, long_text(next(seed)))
                            step(f"  long text merge={merge:d} hide={hide:d}", run)
            if "seeds" in sections:
                step("from-scratch encoder", lambda: choose_kind(page, KIND_TITLES[2]))
                for value in range(1, 9):
                    def new_seed(value=value):
                        type_into(page, "Seed", value, scope=page.locator(
                            '[data-testid="stSidebar"]'))
                        # the caption names the seed once this run has drawn its encoder
                        main_area(page).get_by_text(f"(seed {value})").first.wait_for(
                            timeout=ACTION_TIMEOUT_MS)
                    step(f"seed {value}", new_seed)
            if "folders" in sections:
                first = folders[0]
                for spelled in (f"{first}", f"{first.parent}//{first.name}",
                                f"{first.parent}/./{first.name}", f"{first}/.",
                                *map(str, folders[1:]), f"{first}"):
                    step(f"load {spelled[-40:]}", lambda s=spelled: load_folder(page, s)[:60])
            set_toggle(page, TOGGLES[0], False)
            set_toggle(page, TOGGLES[1], False)
            if "pages" in sections:
                page_steps(page, url, step, seed)
            if "exports" in sections:
                for model_title in (KIND_TITLES[0], KIND_TITLES[1]):
                    def prepare(model_title=model_title):
                        visit_page(page, "Attention maps", "Attention maps")
                        choose_kind(page, model_title)
                        set_text(page, long_text(next(seed)))
                        settle(page)
                    step(f"attention maps, long text ({model_title[:18]})", prepare)
                    for label in ("Head as CSV", "Layer as JSON", "All heads as NPZ"):
                        step(f"export {label} ({model_title[:18]})",
                             lambda label=label: f"{download(page, label) / 2**20:.1f} MB")
            if "long" in sections:  # last: every store is full when the long forwards run
                long_steps(page, step)
        peak = monitor.peak
    finally:
        shutil.rmtree(base, ignore_errors=True)
    verdict = "met" if peak <= GOAL_BYTES else "NOT met"
    print(f"\nsteps: {len(rows)}, failed: {len(failed)}"
          + (f" ({'; '.join(failed)})" if failed else ""))
    print(f"peak resident memory of the server: {peak / 10**9:.2f} GB "
          f"(goal <= {GOAL_BYTES / 10**9:.0f} GB: {verdict})")


if __name__ == "__main__":
    main()
