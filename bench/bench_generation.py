"""Generation with the key/value cache against a full forward per token, on SmolLM2.

Usage: .venv/bin/python bench/bench_generation.py [--repeats N] [--tokens N] [--prompt-tokens N]
Both produce the same thing: N greedy tokens after a prompt of --prompt-tokens tokens, and for
each step the attention row of every layer and head that chose the token.

- cached: `models.experiments.generation.generate`, the page's path (the prompt once, then one token per step
  with `past_key_values`; it also records the prompt's full attention).
- no cache: N forwards over the whole sequence so far (`use_cache=False`), each keeping the last
  row of every layer's attention. Both ask for the last position's logits only.

They are timed alternately in one run so machine noise hits both; medians are printed.
Goal: the cached path at least 5x faster for 32 tokens at a 200-token prompt.
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

import numpy as np  # noqa: E402
import torch  # noqa: E402

from models.loading.decoder import load_decoder  # noqa: E402
from models.experiments.generation import GenerationSettings, generate  # noqa: E402

GOAL = 5.0
WORDS = ("the quick brown fox jumps over the lazy dog while the cat watches from the warm mat "
         "and the children read old stories about ships kings rivers and distant mountains ")


def prompt_of(tokenizer, size: int) -> str:
    """A text that tokenizes to exactly `size` tokens."""
    words = (WORDS * 40).split()
    for count in range(1, len(words) + 1):
        text = " ".join(words[:count])
        if len(tokenizer(text)["input_ids"]) >= size:
            if len(tokenizer(text)["input_ids"]) != size:
                raise ValueError(f"no text of exactly {size} tokens")
            return text
    raise ValueError(f"cannot build {size} tokens")


def without_cache(model, input_ids: torch.Tensor, steps: int) -> tuple[list[int], list[np.ndarray]]:
    """N greedy tokens, each from a full forward over the sequence so far."""
    sequence, chosen, rows = input_ids, [], []
    with torch.inference_mode():
        for _ in range(steps):
            output = model(input_ids=sequence, use_cache=False, output_attentions=True,
                           logits_to_keep=1)
            rows.append(np.stack([layer[0, :, -1].numpy() for layer in output.attentions]))
            token = output.logits[0, -1].argmax()
            chosen.append(int(token))
            sequence = torch.cat([sequence, token.view(1, 1)], dim=1)  # (1, t + 1)
    return chosen, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--prompt-tokens", type=int, default=200)
    args = parser.parse_args()
    loaded = load_decoder()
    prompt = prompt_of(loaded.tokenizer, args.prompt_tokens)
    input_ids = loaded.tokenizer(prompt, return_tensors="pt")["input_ids"]
    settings = GenerationSettings(new_tokens=args.tokens)
    end = loaded.model.generation_config.eos_token_id
    loaded.model.generation_config.eos_token_id = None  # always generate every token asked for

    def cached():
        return generate(loaded.model, loaded.tokenizer, prompt, settings,
                        token_limit=loaded.max_tokens, source=loaded.name)

    def full():
        return without_cache(loaded.model, input_ids, args.tokens)

    try:
        result, (reference_ids, reference_rows) = cached(), full()  # also the warm-up
        assert result.generated_ids == tuple(reference_ids), "the two paths chose different tokens"
        difference = max(float(np.abs(step.weights - row).max())
                         for step, row in zip(result.steps, reference_rows))
        cached_times, full_times = [], []
        for _ in range(args.repeats):
            for runner, times in ((full, full_times), (cached, cached_times)):
                start = time.perf_counter()
                runner()
                times.append(time.perf_counter() - start)
    finally:
        loaded.model.generation_config.eos_token_id = end
    cached_s, full_s = statistics.median(cached_times), statistics.median(full_times)
    ratio = full_s / cached_s
    print(f"model: {loaded.name}, torch threads: {torch.get_num_threads()}, "
          f"repeats: {args.repeats} (median)")
    print(f"largest difference between the two paths' attention rows: {difference:.1e}")
    print(f"{'prompt':>6} {'new':>4} {'cached s':>9} {'no cache s':>11} {'speed-up':>9}  goal")
    goal = f">= {GOAL:g}x {'met' if ratio >= GOAL else 'MISSED'}"
    print(f"{args.prompt_tokens:>6} {args.tokens:>4} {cached_s:>9.2f} {full_s:>11.2f} "
          f"{ratio:>8.1f}x  {goal}")


if __name__ == "__main__":
    main()
