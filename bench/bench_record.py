"""Text -> Trace (the app's one run path) against the bare model call, side by side.

Usage: .venv/bin/python bench/bench_record.py [--repeats N]
The app's path (tokenize, one captured forward that keeps q, k, v and context, the record, and
for the decoder the prediction summaries) against `model(**inputs, output_attentions=True)`.
Prints median milliseconds and the ratio: the encoder (MiniLM) at 8, 128 and 512 tokens and the
decoder (SmolLM2) at 128 and 352. Goal: ratio <= 1.3 at 128 and 512 (encoder) and 128 and 352
(decoder). The two are timed alternately in one run so machine noise hits both.
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

from models.loading.conversion import prepare_default_decoder  # noqa: E402
from models.loading.decoder import DEFAULT_DECODER, load_decoder  # noqa: E402
from models.loading.pretrained import DEFAULT_MODEL, load_pretrained  # noqa: E402
from models.loading.kinds import DECODER, PRETRAINED, KindSpec
from models.loading.source import ModelSource  # noqa: E402

SIZES = {PRETRAINED: (8, 128, 512), DECODER: (128, 352)}
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
    prepare_default_decoder()
    print(f"torch threads: {torch.get_num_threads()}, repeats: {args.repeats} (median)")
    print(f"{'model':>8} {'tokens':>6} {'app path ms':>12} {'bare call ms':>13} {'ratio':>6}  goal")
    for kind, sizes in SIZES.items():
        if kind is DECODER:
            loaded = load_decoder(DEFAULT_DECODER)
            runner = ModelSource(kind, DEFAULT_DECODER).load(decoder=lambda name: loaded)
        else:
            loaded = load_pretrained(DEFAULT_MODEL)
            runner = ModelSource(kind, DEFAULT_MODEL).load(pretrained=lambda name: loaded)
        for size in sizes:
            measure(kind, runner, size, args.repeats)


def measure(kind: KindSpec, runner, size: int, repeats: int) -> None:
    text = text_of(runner.tokenizer, size)
    encoded = runner.tokenizer(text, return_tensors="pt")
    inputs = {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}
    if kind is PRETRAINED:
        inputs = dict(encoded)
    assert inputs["input_ids"].shape[1] == size

    def bare():
        with torch.inference_mode():
            return runner.model(**inputs, output_attentions=True)

    def app():
        return runner.run(text)

    assert app().record.num_tokens == size
    bare_times, app_times = [], []
    for _ in range(2):  # warm-up
        bare(), app()
    for _ in range(repeats):
        for call, times in ((bare, bare_times), (app, app_times)):
            start = time.perf_counter()
            call()
            times.append((time.perf_counter() - start) * 1000)
    app_ms, bare_ms = statistics.median(app_times), statistics.median(bare_times)
    ratio = app_ms / bare_ms
    goal = f"<= {GOAL} {'met' if ratio <= GOAL else 'MISSED'}" if size >= 128 else "-"
    name = "MiniLM" if kind is PRETRAINED else "SmolLM2"
    print(f"{name:>8} {size:>6} {app_ms:>12.1f} {bare_ms:>13.1f} {ratio:>6.2f}  {goal}")


if __name__ == "__main__":
    main()
