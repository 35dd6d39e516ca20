"""Long inputs on the decoder (SmolLM2), side by side in one run, printed as one table per length.

Usage: .venv/bin/python bench/bench_long.py [--tokens 2048 4096] [--repeats 3] [--sessions 1]
           [--no-browser]

Threads: `models.threads.configure_threads(--sessions)` is applied before torch is imported, so
both sides of every ratio run on the same threads (the plan's), OpenMP waiting passively.

(a) Server memory held per cached input: a long input at each --tokens (what the app keeps of
    it: the tokens, every head's thumbnail, statistics, detector scores and role shares, the
    rollout's pooled maps; its per-layer inputs go to disk and are printed apart) against a full
    trace at the decoder's full-trace limit (352 tokens). Goals: <= 64 MB, and >= 10x less.
(b) Text -> every head's thumbnail: the whole "read all" stream the app runs
    (models.hooks.access.read_streamed: one forward, each layer's maps reduced by the Summary
    with the value norms as soon as they exist, each layer's input written to disk) against the
    bare forward with eager attention of the same tokens (every layer's weights computed, none
    kept). The two alternate, --repeats times, medians compared. Goal: <= 1.3x. With the browser
    (the default), also the served app from clicking "Read all ... tokens" to the mosaic and the
    exact head painted in headless Chromium, against the same bare forward (goal <= 3x).
(d) The served app's long line: its one forward on every core (models.threads
    `one_forward_threads`, what ui/attention.py's line runs) against one thread (a served
    session's plan on a 2-core machine), the whole "read all" stream each, alternately. Goal:
    faster on a machine of more than one core.
(c) Opening one exact head from its layer's kept input (first, middle, last layer). Goal:
    < 1 s. Also printed: one exact query row (the one-row page) and a 64-token window of every
    layer (the bertviz page), from the kept inputs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _sessions() -> int:
    """--sessions, read before argparse runs: the thread plan must be set before torch loads."""
    arguments = sys.argv[1:]
    return int(arguments[arguments.index("--sessions") + 1]) if "--sessions" in arguments else 1


from models.threads import configure_threads  # noqa: E402

PLAN = configure_threads(_sessions())

import torch  # noqa: E402

from models.hooks.access import read_streamed  # noqa: E402
from models.hooks.long_rows import exact_rows, window_maps  # noqa: E402
from models.hooks.streaming import exact_head, prepare  # noqa: E402
from models.loading.conversion import prepare_default_decoder  # noqa: E402
from models.loading.decoder import DEFAULT_DECODER, load_decoder  # noqa: E402
from models.loading.kinds import DECODER  # noqa: E402
from models.loading.source import ModelSource  # noqa: E402
from models.store.byte_cache import array_bytes  # noqa: E402
from models.threads import one_forward_threads, torch_threads  # noqa: E402

GOAL_STREAM = 1.3
GOAL_BROWSER = 3.0
WORDS = "I saw a cat and a dog by the old red barn, so we ran to it.".split()
MB = 1e6


def text_of(tokenizer, tokens: int) -> str:
    words = WORDS * (tokens // 3)
    low, high = 1, len(words)
    while low < high:  # the fewest words that reach `tokens` tokens
        middle = (low + high) // 2
        if len(tokenizer(" ".join(words[:middle]))["input_ids"]) >= tokens:
            high = middle
        else:
            low = middle + 1
    return " ".join(words[:low])


def timed(call) -> tuple[float, object]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def bare_eager_forward(runner, encoded) -> float:
    """Seconds for the model's forward with eager attention: every layer's weights computed and
    dropped (the app's capture is not active, so nothing is kept)."""
    inputs = runner.model_inputs(encoded)
    with torch.inference_mode():
        return timed(lambda: runner.model.base_model(**inputs, use_cache=False))[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=int, nargs="+", default=[2048, 4096])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=1)
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    prepare_default_decoder()
    loaded = load_decoder(DEFAULT_DECODER)
    runner = ModelSource(DECODER, DEFAULT_DECODER).load(decoder=lambda name: loaded)
    print(f"SmolLM2; {PLAN.describe()}; full trace {runner.max_tokens} tokens; "
          f"median of {args.repeats}, the two sides alternating")
    full = runner.run(text_of(runner.tokenizer, runner.max_tokens))
    for tokens in args.tokens:
        measure(runner, full, tokens, args)


def measure(runner, full, tokens: int, args) -> None:
    """Measure one length; every streamed input's files go under one scratch folder that is
    removed afterwards (a 4,096-token input's files are hundreds of MB)."""
    with tempfile.TemporaryDirectory(prefix="bench-long-") as scratch:
        measure_in(Path(scratch), runner, full, tokens, args)


def measure_in(scratch: Path, runner, full, tokens: int, args) -> None:
    long_text = text_of(runner.tokenizer, tokens)
    encoded, _ = prepare(runner, long_text, None)
    assert len(encoded.tokens) == tokens, len(encoded.tokens)
    bare, streamed_times, held, disk = [], [], [], []
    attention = previous = None
    for repeat in range(args.repeats):  # alternately, so machine noise hits both
        folder = Path(tempfile.mkdtemp(dir=scratch))

        def read_all():
            return read_streamed(runner, long_text, None, folder)

        if repeat % 2:
            seconds, attention = timed(read_all)
            bare.append(bare_eager_forward(runner, encoded))
        else:
            bare.append(bare_eager_forward(runner, encoded))
            seconds, attention = timed(read_all)
        streamed_times.append(seconds)
        summary = attention.summary()
        held.append(array_bytes(encoded) + summary.nbytes)
        disk.append(attention.inputs.disk_bytes)
        if previous is not None:  # the earlier repeat's files
            previous.close()
        previous = attention
    every_core = one_forward_threads()
    lines = {1: [], every_core: []}
    for repeat in range(args.repeats if every_core > 1 else 0):  # (d), alternately
        for count in ((1, every_core) if repeat % 2 else (every_core, 1)):
            with torch_threads(count):
                seconds, line_read = timed(lambda: read_streamed(
                    runner, long_text, None, Path(tempfile.mkdtemp(dir=scratch))))
            line_read.close()
            lines[count].append(seconds)
    inputs = attention.inputs
    layers = attention.num_layers
    opened = {}
    for layer in (0, layers // 2, layers - 1):
        times = [timed(lambda: exact_head(runner, encoded, layer, attention.num_heads - 1,
                                          inputs))[0] for _ in range(args.repeats)]
        opened[layer] = statistics.median(times)
    head_bytes = tokens * tokens * 4
    last = tokens - 1
    row_seconds = statistics.median(
        timed(lambda: exact_rows(runner, encoded, layers // 2, range(last, last + 1), inputs))[0]
        for _ in range(args.repeats))
    window_seconds = timed(lambda: window_maps(runner, encoded, last - 63, last + 1, inputs))[0]

    rows = [
        ("(a) memory per cached input", f"{held[-1] / MB:.1f} MB at {tokens}",
         f"{full.nbytes / MB:.1f} MB full trace at {runner.max_tokens}",
         f"{full.nbytes / held[-1]:.0f}x less", "<= 64 MB and >= 10x less",
         held[-1] <= 64 * MB and full.nbytes / held[-1] >= 10),
    ]
    bare_s, streamed_s = statistics.median(bare), statistics.median(streamed_times)
    ratio = streamed_s / bare_s
    rows.append(("(b) text -> all thumbnails (read all)", f"{streamed_s:.1f} s",
                 f"{bare_s:.1f} s bare eager forward", f"{ratio:.2f}x",
                 f"<= {GOAL_STREAM}x", ratio <= GOAL_STREAM))
    if not args.no_browser:
        painted = browser_seconds(long_text, tokens)
        ratio = painted / bare_s
        rows.append(("(b) click -> mosaic + head painted", f"{painted:.1f} s",
                     f"{bare_s:.1f} s bare eager forward", f"{ratio:.2f}x",
                     f"<= {GOAL_BROWSER:g}x", ratio <= GOAL_BROWSER))
    if every_core > 1:
        one, every = statistics.median(lines[1]), statistics.median(lines[every_core])
        rows.append((f"(d) the long line on {every_core} threads", f"{every:.1f} s",
                     f"{one:.1f} s on 1 thread", f"{every / one:.2f}x", "< 1x", every < one))
    for layer, seconds in opened.items():
        rows.append((f"(c) open one exact head, layer {layer}", f"{seconds:.2f} s", "", "",
                     "< 1 s", seconds < 1))
    rows.append(("(c) one exact query row, every head", f"{row_seconds:.2f} s", "", "", "", True))
    rows.append(("(c) 64-token window, every layer", f"{window_seconds:.1f} s", "", "", "", True))
    width = max(len(row[0]) for row in rows)
    print(f"\n{tokens} tokens; read all: {' '.join(f'{t:.1f}' for t in streamed_times)} s, "
          f"bare: {' '.join(f'{t:.1f}' for t in bare)} s")
    print(f"{'measure':<{width}}  {'long input':>22}  {'against':>38}  {'ratio':>9}  goal")
    for name, value, against, ratio_text, goal, met in rows:
        print(f"{name:<{width}}  {value:>22}  {against:>38}  {ratio_text:>9}  {goal} "
              f"{('met' if met else 'MISSED') if goal else ''}")
    print(f"kept on disk per long input: {disk[-1] / MB:.0f} MB (each layer's input); one opened "
          f"head kept in memory while viewed: {head_bytes / MB:.0f} MB")
    attention.close()


def browser_seconds(text: str, tokens: int) -> float:
    """The served app: from clicking the long-input toggle to the mosaic and the exact head."""
    from tests.browser_support import launch_chromium, served_app, set_sidebar_text, wait_idle

    with served_app() as url, launch_chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.goto(f"{url}/all_heads?model=decoder")
        page.get_by_role("heading", name="All heads at once").first.wait_for(timeout=240_000)
        set_sidebar_text(page, text)
        wait_idle(page, 240_000)
        toggle = page.get_by_text(f"Read all {tokens:,} tokens, layer by layer")
        toggle.wait_for(timeout=240_000)
        start = time.perf_counter()
        toggle.click()
        titles = page.locator(".js-plotly-plot .gtitle")
        titles.filter(has_text="All 30 layers × 9 heads").wait_for(timeout=900_000)
        titles.filter(has_text=f"all {tokens} tokens").wait_for(timeout=300_000)
        return time.perf_counter() - start


if __name__ == "__main__":
    main()
