"""The single-head ablation grid (every head ablated alone) against one forward pass.

Usage: OMP_NUM_THREADS=1 .venv/bin/python bench/bench_ablation.py [--repeats N] [--tokens T]
           [--batches B ...] [--models SmolLM2 MiniLM]
At a 30-token input, for SmolLM2 (30 x 9 = 270 heads) and MiniLM (6 x 12 = 72 heads): the
median time of one bare forward pass `model(**inputs)`, and the time of the whole grid at the
batch the app picks (`ablation.grid_batch_size`, marked "(app)") and at any --batches
(single-head ablations per forward; batch 1 = one ablation per forward). The two alternate,
repeat by repeat, so the machine's load falls on both; medians are compared.
"forwards/head" = grid time / (heads x one forward). Goal: <= 0.5 at the app's batch size (each
batch starts at its first head's layer from the plain run's kept input: the layers below an
ablated head are not run again). Threads: models.threads.configure_threads before torch loads
(OMP_NUM_THREADS, when set, is the count), the same on both sides.

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

from models.threads import configure_threads  # noqa: E402

PLAN = configure_threads()

import torch  # noqa: E402
from transformers import BertForMaskedLM, logging as hf_logging  # noqa: E402

from models.experiments import ablation, targets
from models.hooks.capture import install  # noqa: E402
from models.loading.conversion import prepare_default_decoder  # noqa: E402
from models.loading.decoder import DEFAULT_DECODER, load_decoder  # noqa: E402
from models.loading.pretrained import DEFAULT_MODEL, default_model_path, load_pretrained  # noqa: E402

GOAL = 0.5
FORWARDS_PER_REPEAT = 5
TEXT = ("Mario is short, but he can jump super high, and the princess waits for him in the "
        "castle at the end of every world, far away beyond the hills")  # 33 tokens on SmolLM2


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


def measure(name: str, model, tokenizer, causal: bool, tokens: int, repeats: int,
            batches: list[int]) -> None:
    prepared = targets.prepare(model, tokenizer, tokens, TEXT, causal, name)
    if causal:
        target = ablation.predict(model, prepared, tokenizer).target
    else:
        prepared, target = targets.with_mask(prepared, tokenizer, prepared.num_tokens // 2)
    count = prepared.num_tokens
    assert count == tokens, f"the text has {count} tokens, fewer than --tokens {tokens}"
    heads = model.config.num_hidden_layers * model.config.num_attention_heads
    with torch.inference_mode():
        model(**prepared.inputs)  # warm up
    app_batch = ablation.grid_batch_size(ablation.plain_run(model, prepared), prepared)
    for batch in sorted(set(batches) | {app_batch}):
        forwards, grids = [], []
        for _ in range(repeats):  # alternately: a few forwards, then the grid
            with torch.inference_mode():
                forwards.append(timed(lambda: model(**prepared.inputs), FORWARDS_PER_REPEAT))
            grids.append(timed(lambda: ablation.importance_grid(model, prepared, target,
                                                                batch_size=batch), 1))
        forward, grid = statistics.median(forwards), statistics.median(grids)
        per_head = grid / (heads * forward)
        mark = " (app)" if batch == app_batch else ""
        goal = ("met" if per_head <= GOAL else "MISSED") if batch == app_batch else ""
        print(f"{name:>8} {count:>6} {heads:>5} {forward * 1e3:>10.1f} {str(batch) + mark:>9} "
              f"{grid:>8.2f} {per_head:>13.2f}  {goal}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=30)
    parser.add_argument("--batches", type=int, nargs="*", default=[])
    parser.add_argument("--models", nargs="+", default=["SmolLM2", "MiniLM"])
    args = parser.parse_args()
    print(f"{PLAN.describe()}; forward: median of {args.repeats} medians of "
          f"{FORWARDS_PER_REPEAT}, grid: median of {args.repeats}, alternating")
    print(f"{'model':>8} {'tokens':>6} {'heads':>5} {'forward ms':>10} {'batch':>9} "
          f"{'grid s':>8} {'forwards/head':>13}  goal <= {GOAL}")
    for name in args.models:
        model, tokenizer = smollm2() if name == "SmolLM2" else minilm_masked()
        measure(name, model, tokenizer, name == "SmolLM2", args.tokens, args.repeats,
                args.batches)


if __name__ == "__main__":
    main()
