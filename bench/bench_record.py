"""Text -> AttentionRecord (the app's path) against the bare model call, side by side.

Usage: .venv/bin/python bench/bench_record.py [--repeats N]
Prints median milliseconds and the ratio for 8, 128 and 512 tokens. Goal: ratio <= 1.3 at
128 and 512 tokens. The two are timed alternately in one run so machine noise hits both.
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

from models.pretrained import DEFAULT_MODEL, load_pretrained, run_pretrained  # noqa: E402

SIZES = (8, 128, 512)
GOAL = 1.3


def text_of(tokenizer, size: int) -> str:
    """A sentence that tokenizes to exactly `size` tokens, special tokens included."""
    words = ("time flies like an arrow fruit flies like a banana " * 60).split()
    for count in range(1, len(words) + 1):
        text = " ".join(words[:count])
        if len(tokenizer(text)["input_ids"]) >= size:
            return text
    raise ValueError(f"cannot build {size} tokens")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    loaded = load_pretrained(DEFAULT_MODEL)
    print(f"model: {DEFAULT_MODEL}, torch threads: {torch.get_num_threads()}, "
          f"repeats: {args.repeats} (median)")
    print(f"{'tokens':>6} {'app path ms':>12} {'bare call ms':>13} {'ratio':>6}  goal")
    for size in SIZES:
        text = text_of(loaded.tokenizer, size)
        inputs = loaded.tokenizer(text, return_tensors="pt")
        assert inputs["input_ids"].shape[1] == size

        def bare():
            with torch.inference_mode():
                return loaded.model(**inputs, output_attentions=True)

        def app():
            return run_pretrained(loaded, text)

        assert app().num_tokens == size
        bare_times, app_times = [], []
        for _ in range(2):  # warm-up
            bare(), app()
        for _ in range(args.repeats):
            for runner, times in ((bare, bare_times), (app, app_times)):
                start = time.perf_counter()
                runner()
                times.append((time.perf_counter() - start) * 1000)
        app_ms, bare_ms = statistics.median(app_times), statistics.median(bare_times)
        ratio = app_ms / bare_ms
        goal = f"<= {GOAL} {'met' if ratio <= GOAL else 'MISSED'}" if size >= 128 else "-"
        print(f"{size:>6} {app_ms:>12.1f} {bare_ms:>13.1f} {ratio:>6.2f}  {goal}")


if __name__ == "__main__":
    main()
