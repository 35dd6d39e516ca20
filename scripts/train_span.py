"""Train the small span-masked encoder on the synthetic task and write its learned spans as JSON.

Usage: python scripts/train_span.py [--out models/teaching/learned_spans.json] [--steps N] [--seed N]

The JSON (spans per layer and head, loss curve, accuracy, settings, seconds) is what the
Adaptive span page shows; no weights are written. The page can also retrain live with the
same function, reporting progress through `train_span_model(config, progress)`.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from models.teaching.span_training import (  # noqa: E402
    LEARNED_SPANS_PATH, SpanTrainingConfig, train_span_model,
)


def print_progress(step: int, total: int, loss: float) -> None:
    if step % 100 == 0 or step == total:
        print(f"step {step:4d}/{total}  task loss {loss:.4f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=LEARNED_SPANS_PATH)
    parser.add_argument("--steps", type=int, default=SpanTrainingConfig.steps)
    parser.add_argument("--seed", type=int, default=SpanTrainingConfig.seed)
    parser.add_argument("--penalty", type=float, default=SpanTrainingConfig.penalty)
    args = parser.parse_args()
    config = dataclasses.replace(SpanTrainingConfig(), steps=args.steps, seed=args.seed,
                                 penalty=args.penalty)
    _, result = train_span_model(config, print_progress)
    print(f"trained in {result.seconds:.1f} s; accuracy {result.accuracy}")
    for layer, row in enumerate(result.spans):
        print(f"layer {layer}: " + "  ".join(f"head {h} z={z:5.2f}" for h, z in enumerate(row)))
    args.out.write_text(result.to_json(), encoding="utf-8")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
