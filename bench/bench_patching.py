"""Activation patching's per-head grid on SmolLM2, and attribution patching beside it.

Usage: .venv/bin/python bench/bench_patching.py [--repeats N] [--tokens T] [--threads K]
           [--batch-one]

A clean and a corrupted prompt of T tokens (default 30) that differ in one token; SmolLM2 has
30 layers x 9 heads = 270 heads. Reported, with torch's threads set to K on every side:
- one bare forward pass `model(**inputs)` of one prompt, as each patched copy runs (the last
  position's logits only), the median of N medians, timed alternately with the grid;
- the whole per-head grid (every head patched alone, models/experiments/patching.py) at the
  app's batch size (and at batch 1 with --batch-one), its batched forwards, and
  "forwards/head" = grid time / (heads x one forward). Each batch starts at its first cell's
  layer from the corrupted run's kept input (the layers below are unchanged). Goal: <= 0.5 at
  the app's batch size;
- attribution patching (every head and every layer x position, one clean forward, one
  corrupted forward and one backward) against the exact per-head grid: its time, the ratio, and
  how well it agrees with the exact grid (correlation over the heads).
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

import torch  # noqa: E402

from models.experiments import attribution, contrast, patching  # noqa: E402
from models.loading.conversion import prepare_default_decoder  # noqa: E402
from models.loading.kinds import DECODER
from models.loading.source import ModelSource  # noqa: E402

GOAL = 0.5
FORWARDS_PER_REPEAT = 5
START, END = "When Mary and John went to the store", ", John gave a drink to"
FILLERS = ("in the old town on a sunny day after school with their friends from the village by "
           "the river").split()  # words put between the two, as many as the length needs
ANSWER, WRONG, THIRD = "Mary", "John", "Paul"


def prompts(tokenizer, tokens: int) -> tuple[str, str]:
    """An indirect-object sentence of `tokens` tokens, and its corrupted twin with a third name
    as the giver (as many tokens)."""
    for count in range(len(FILLERS) + 1):
        clean = " ".join((START, *FILLERS[:count])) + END
        if len(tokenizer(clean)["input_ids"]) >= tokens:
            break
    if len(tokenizer(clean)["input_ids"]) != tokens:
        raise SystemExit(f"No sentence of exactly {tokens} tokens: try another --tokens.")
    return clean, clean.replace(f", {WRONG} gave", f", {THIRD} gave")


def timed(function, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-one", action="store_true")
    arguments = parser.parse_args()
    torch.set_num_threads(arguments.threads)
    prepare_default_decoder()
    loaded = ModelSource.default(DECODER).load()
    clean, corrupted = prompts(loaded.tokenizer, arguments.tokens)
    pair = contrast.prompt_pair(loaded, clean, corrupted)
    difference = contrast.logit_difference(loaded, pair.clean, ANSWER, WRONG, pair.corrupted)
    inputs = pair.corrupted.batched(loaded.model, 1, last_only=True)  # as each patched copy
    with torch.inference_mode():
        loaded.model(**inputs)  # warm up
    heads = 30 * 9
    print(f"SmolLM2, {pair.num_tokens} tokens, {arguments.threads} thread(s); clean: {clean!r}")
    grids = {}
    batches = (("app's batch", None), ("batch 1", 1)) if arguments.batch_one else \
        (("app's batch", None),)
    for label, batch in batches:
        forwards, grid_times = [], []
        for _ in range(1 if batch == 1 else max(1, arguments.repeats // 2)):  # alternately
            with torch.inference_mode():
                forwards.append(timed(lambda: loaded.model(**inputs), FORWARDS_PER_REPEAT))
            grid_times.append(timed(lambda: grids.__setitem__(label, patching.patching_grid(
                loaded, pair, difference, patching.HEAD, batch_size=batch)), 1))
        forward, grid_time = statistics.median(forwards), statistics.median(grid_times)
        grid = grids[label]
        per_head = grid_time / (heads * forward)
        print(f"  one bare forward: {forward * 1000:.1f} ms")
        verdict = f"(goal <= {GOAL}: {'met' if per_head <= GOAL else 'MISSED'})"
        print(f"  per-head grid, {label:11s}: {grid_time:6.2f} s in {grid.forwards:3d} forwards, "
              f"{per_head:.2f} forwards/head {verdict if batch is None else ''}")
    exact = grids["app's batch"]
    estimate_time = timed(lambda: grids.__setitem__("estimate", attribution.attribution_patching(
        loaded, pair, difference)), arguments.repeats)
    estimate = grids["estimate"]
    exact_time = timed(lambda: patching.patching_grid(loaded, pair, difference, patching.HEAD),
                       max(1, arguments.repeats // 2))
    matched = attribution.agreement(exact.values, estimate.heads, 3)
    print(f"  attribution patching (all sites): {estimate_time:6.2f} s   exact per-head grid: "
          f"{exact_time:6.2f} s   exact / attribution: {exact_time / estimate_time:.1f}x")
    print(f"  agreement over the 270 heads: correlation {matched.correlation:.3f}; largest "
          "gaps: " + ", ".join(f"L{cell[0]}H{cell[1]} exact {value:.2f} estimate {guess:.2f}"
                               for cell, value, guess in matched.disagreements))


if __name__ == "__main__":
    main()
