"""The single-head ablation grid (every head ablated alone) against one forward pass.

Usage: .venv/bin/python bench/bench_ablation.py [--repeats N] [--tokens T]
At a 20-token input, for MiniLM (6 x 12 = 72 heads) and SmolLM2 (30 x 9 = 270 heads): the
median time of one bare forward pass `model(**inputs)`, and the time of the whole grid at
several batch sizes (single-head ablations per forward; batch 1 = one forward per head; "(app)"
marks the batch the app picks, `ablation.grid_batch_size`).
"forwards/head" = grid time / (heads x one forward). Goal: <= 1.5 at the app's batch size.

MiniLM ships without its masked-LM head (a sentence-transformers checkpoint), so the app's
ablation page tells the user it has no prediction to change. For the timing, its weights are
loaded into BertForMaskedLM: the encoder is the real MiniLM and the head's output layer is tied
to its word embeddings; the head's small transform is freshly initialised, so the numbers are
timings only, not a meaningful prediction. The target is the masked word.
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
from transformers import BertForMaskedLM, logging as hf_logging  # noqa: E402

from models.experiments import ablation
from models.hooks.capture import install  # noqa: E402
from models.loading.conversion import prepare_default_decoder  # noqa: E402
from models.loading.decoder import DEFAULT_DECODER, load_decoder  # noqa: E402
from models.loading.pretrained import DEFAULT_MODEL, default_model_path, load_pretrained  # noqa: E402

GOAL = 1.5
BATCHES = (1, 8, 16, ablation.DEFAULT_BATCH, 64)
TEXT = ("Mario is short, but he can jump super high, and the princess waits for him in the "
        "castle at the end of every world")


def timed(function, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def minilm_masked() -> tuple[torch.nn.Module, object]:
    hf_logging.set_verbosity_error()  # the head's transform is new: transformers says so
    model = BertForMaskedLM.from_pretrained(
        default_model_path(), attn_implementation="eager", use_safetensors=True,
        trust_remote_code=False, local_files_only=True).eval()
    return install(model), load_pretrained(DEFAULT_MODEL).tokenizer


def smollm2() -> tuple[torch.nn.Module, object]:
    prepare_default_decoder()
    loaded = load_decoder(DEFAULT_DECODER)
    return install(loaded.model), loaded.tokenizer


def measure(name: str, model, tokenizer, causal: bool, tokens: int, repeats: int) -> None:
    prepared = ablation.prepare(model, tokenizer, tokens, TEXT, causal, name)
    if causal:
        target = ablation.predict(model, prepared, tokenizer).target
    else:
        prepared, target = ablation.with_mask(prepared, tokenizer, prepared.num_tokens // 2)
    count = prepared.num_tokens
    with torch.inference_mode():
        model(**prepared.inputs)  # warm up
        forward = timed(lambda: model(**prepared.inputs), repeats)
    app_batch = ablation.grid_batch_size(ablation.plain_run(model, prepared), prepared)
    for batch in sorted(set(BATCHES) | {app_batch}):
        grid = timed(lambda: ablation.importance_grid(model, prepared, target,
                                                      batch_size=batch), max(1, repeats // 5))
        heads = model.config.num_hidden_layers * model.config.num_attention_heads
        per_head = grid / (heads * forward)
        mark = " (app)" if batch == app_batch else ""
        goal = ("met" if per_head <= GOAL else "missed") if batch == app_batch else ""
        print(f"{name:>8} {count:>6} {heads:>5} {forward * 1e3:>10.1f} {str(batch) + mark:>9} "
              f"{grid:>8.2f} {per_head:>13.2f}  {goal}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--tokens", type=int, default=20)
    args = parser.parse_args()
    print(f"torch threads: {torch.get_num_threads()}, forward: median of {args.repeats}, "
          f"grid: median of {max(1, args.repeats // 5)}")
    print(f"{'model':>8} {'tokens':>6} {'heads':>5} {'forward ms':>10} {'batch':>9} "
          f"{'grid s':>8} {'forwards/head':>13}  goal <= {GOAL}")
    model, tokenizer = minilm_masked()
    measure("MiniLM", model, tokenizer, False, args.tokens, args.repeats)
    model, tokenizer = smollm2()
    measure("SmolLM2", model, tokenizer, True, args.tokens, args.repeats)


if __name__ == "__main__":
    main()
