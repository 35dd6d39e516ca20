"""The toy translator's full training run: time on the CPU and held-out exact-match accuracy.

    .venv/bin/python bench/bench_translation.py [--repeats 2]

Trains the app's own settings (models/teaching/seq2seq_training.py's TrainingSettings(), which train on
one torch thread) from their seed, without the disk cache, alternating with the same settings
on two threads, and prints one row per run. Goals: at most 60 s on this 2-core machine, at least
95 % of the held-out sentences (never seen in training) translated exactly. The machine's load
average is printed too: other work on the same cores slows every number here.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from models.teaching.seq2seq_training import train, translate  # noqa: E402
from models.teaching.trained_translator import TrainingSettings  # noqa: E402
from models.teaching.translation_task import EXAMPLE_SENTENCES  # noqa: E402

TIME_GOAL_S = 60.0
ACCURACY_GOAL = 0.95


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    arguments = parser.parse_args()
    torch.set_num_threads(2)  # the server's count; training sets its own while it runs
    settings = TrainingSettings()
    print(f"settings: {settings.steps} steps, batch {settings.batch_size}, "
          f"{settings.num_layers}+{settings.num_layers} layers x {settings.num_heads} heads, "
          f"width {settings.hidden_size}; {settings.task.train_size} training and "
          f"{settings.task.held_out_size} held-out sentences")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'run':>3}  {'threads':>7}  {'wall s':>7}  {'cpu s':>7}  {'held-out exact':>14}  "
          f"{'final loss':>10}  goal")
    for run in range(1, arguments.repeats + 1):
        for threads in (settings.threads, 2):
            cpu = time.process_time()
            trained = train(replace(settings, threads=threads))
            cpu = time.process_time() - cpu
            met = trained.seconds <= TIME_GOAL_S and trained.held_out_accuracy >= ACCURACY_GOAL
            print(f"{run:>3}  {threads:>7}  {trained.seconds:>7.1f}  {cpu:>7.1f}  "
                  f"{trained.held_out_accuracy:>14.1%}  {trained.losses[-1]:>10.4f}  "
                  f"{'met' if met else 'NOT met'}")
    print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    trained = train(settings)
    for sentence in EXAMPLE_SENTENCES:
        translation = translate(trained, sentence)
        print(f"  {sentence!r} -> {translation.text!r} ({'right' if translation.correct else 'wrong'})")


if __name__ == "__main__":
    main()
