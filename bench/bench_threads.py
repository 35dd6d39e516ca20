"""Concurrent sessions' forwards with the server's thread plan (models/threads.py) against
torch's default, and generation with its key/value cache against without, under that contention.

Usage: .venv/bin/python bench/bench_threads.py [--repeats 3] [--tokens 128] [--forwards 4]
           [--sessions 1 2 4] [--generation-sessions 2] [--new-tokens 32] [--prompt-tokens 200]

Each measurement is one fresh process, as a server is: SmolLM2 loaded once, then N sessions run
at the same moment, each a thread of that process (as Streamlit runs sessions) doing --forwards
eager forwards with attentions at --tokens tokens. Two sides:

- server: `configure_server_threads()` called before torch is imported, as app.py does (one
  thread per forward, OpenMP waiting passively; ATTENTION_EXPLORER_THREADS unset);
- default: torch as it starts (one thread per core, OpenMP's own waiting).

The wait policy is read once, as OpenMP starts, so the two sides cannot share a process; they
alternate, repeat by repeat, so the machine's other load falls on both, and medians are printed.
The unit is one forward alone on the server's plan (one session). Goal: with the server's plan,
the time per forward grows no faster than the sessions per core, at most max(1, N / cores) x
the unit (no collapse).

Generation (server's plan): --generation-sessions sessions at once, each generating
--new-tokens greedy tokens after a --prompt-tokens prompt, alternately with the cache
(models.experiments.generation.generate, the page's path) and without it (a full forward over
the sequence so far per token, bench/bench_generation.py's `without_cache`); both sides under the
same contention. Goal: the cache at least 5x faster.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "OPENBLAS_NUM_THREADS",
                    "MKL_NUM_THREADS", "GOMP_SPINCOUNT")
SERVER, DEFAULT, GENERATION = "server", "default", "generation"
GENERATION_GOAL = 5.0
WORDS = "I saw a cat and a dog by the old red barn, so we ran to it.".split()


def child(side: str, sessions: int, args) -> dict:
    """Run in a fresh process: N concurrent sessions' forwards (or generations); the times."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from models.threads import configure_server_threads

    plan = configure_server_threads() if side in (SERVER, GENERATION) else None
    import torch

    from models.loading.decoder import load_decoder

    loaded = load_decoder()
    run = generation_work(loaded, args) if side == GENERATION else forward_work(loaded, args)
    run()  # warm up
    times: dict[str, list[float]] = {}
    lock = threading.Lock()
    ready = threading.Barrier(sessions)

    def session() -> None:
        ready.wait()
        for _ in range(args.forwards if side != GENERATION else 1):
            for name, seconds in run().items():
                with lock:
                    times.setdefault(name, []).append(seconds)

    workers = [threading.Thread(target=session) for _ in range(sessions)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return {"threads": torch.get_num_threads(),
            "wait_policy": os.environ.get("OMP_WAIT_POLICY", "OpenMP's"),
            "plan": "" if plan is None else plan.describe(),
            **{name: statistics.median(values) for name, values in times.items()}}


def forward_work(loaded, args):
    """One eager forward with attentions at --tokens tokens: {"forward": seconds}."""
    import torch

    text = " ".join(WORDS * (args.tokens // 4))
    inputs = loaded.tokenizer(text, return_tensors="pt", truncation=True,
                              max_length=args.tokens)
    assert inputs["input_ids"].shape[1] == args.tokens, inputs["input_ids"].shape

    def run() -> dict[str, float]:
        start = time.perf_counter()
        with torch.inference_mode():
            loaded.model(**inputs, output_attentions=True, use_cache=False)
        return {"forward": time.perf_counter() - start}

    return run


def generation_work(loaded, args):
    """--new-tokens greedy tokens with the cache, then without: {"cached", "uncached": s}."""
    from bench.bench_generation import prompt_of, without_cache
    from models.experiments.generation import GenerationSettings, generate

    prompt = prompt_of(loaded.tokenizer, args.prompt_tokens)
    input_ids = loaded.tokenizer(prompt, return_tensors="pt")["input_ids"]
    settings = GenerationSettings(new_tokens=args.new_tokens)
    loaded.model.generation_config.eos_token_id = None  # every token asked for, both sides

    def run() -> dict[str, float]:
        start = time.perf_counter()
        cached = generate(loaded.model, loaded.tokenizer, prompt, settings,
                          token_limit=loaded.max_tokens, source=loaded.name)
        middle = time.perf_counter()
        chosen, _ = without_cache(loaded.model, input_ids, args.new_tokens)
        end = time.perf_counter()
        assert cached.generated_ids == tuple(chosen), "the two paths chose different tokens"
        return {"cached": middle - start, "uncached": end - middle}

    return run


def _bare_loop(_: int = 0) -> float:
    """Seconds of a pure-Python loop: no memory traffic, no library threads."""
    start = time.perf_counter()
    total = 0
    for number in range(20_000_000):
        total += number
    return time.perf_counter() - start


def machine_pair_factor(repeats: int) -> float:
    """Two bare loops at once (two processes) against one alone, medians: 1.00 when the cores
    are wholly this machine's, more when its host gives them to others meanwhile. The forwards'
    bound assumes 1.00."""
    import multiprocessing

    alone, together = [], []
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        for _ in range(max(repeats, 3)):
            alone.append(pool.map(_bare_loop, [0])[0])
            together.extend(pool.map(_bare_loop, [0, 1], chunksize=1))
    return statistics.median(together) / statistics.median(alone)


def measure(side: str, sessions: int, args) -> dict:
    environment = {name: value for name, value in os.environ.items()
                   if name not in THREAD_VARIABLES}
    command = [sys.executable, __file__, "--child", side, "--sessions", str(sessions),
               "--tokens", str(args.tokens), "--forwards", str(args.forwards),
               "--new-tokens", str(args.new_tokens), "--prompt-tokens", str(args.prompt_tokens)]
    done = subprocess.run(command, env=environment, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--forwards", type=int, default=4)
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--generation-sessions", type=int, default=2)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--prompt-tokens", type=int, default=200)
    parser.add_argument("--child", choices=(SERVER, DEFAULT, GENERATION))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.sessions[0], args)))
        return
    sys.path.insert(0, str(ROOT))
    from models.threads import available_cores

    cores = available_cores()
    pair_before = machine_pair_factor(args.repeats)
    runs: dict[tuple[str, int], list[dict]] = {}
    for repeat in range(args.repeats):  # the sides alternate, repeat by repeat
        order = [(side, count) for count in args.sessions
                 for side in ((SERVER, DEFAULT) if repeat % 2 == 0 else (DEFAULT, SERVER))]
        order.append((GENERATION, args.generation_sessions))
        for side, count in order:
            runs.setdefault((side, count), []).append(measure(side, count, args))

    def median(side: str, count: int, name: str) -> float:
        return statistics.median(run[name] for run in runs[(side, count)])

    pair_after = machine_pair_factor(args.repeats)
    unit = median(SERVER, min(args.sessions), "forward")
    print(f"SmolLM2, {args.tokens} tokens, eager forward with attentions; {cores} cores; "
          f"{args.forwards} forwards per session; median of {args.repeats} processes per cell")
    print(f"server's plan: {runs[(SERVER, min(args.sessions))][0]['plan']}")
    print(f"unit: one forward alone on the server's plan: {unit * 1e3:.0f} ms")
    print(f"the machine: two bare Python loops at once run {pair_before:.2f}x one alone before "
          f"the forwards, {pair_after:.2f}x after (1.00: both cores wholly this machine's)")
    print(f"{'sessions':>8} {'side':>8} {'threads':>7} {'wait':>10} {'s/forward':>10} "
          f"{'x unit':>7} {'bound':>6}  goal (server: x unit <= bound)")
    for count in args.sessions:
        bound = max(1.0, count / cores)
        seconds = {}
        for side in (SERVER, DEFAULT):
            cell = runs[(side, count)]
            seconds[side] = median(side, count, "forward")
            ratio = seconds[side] / unit
            goal = ("met" if ratio <= bound else "MISSED") if side == SERVER else ""
            print(f"{count:>8} {side:>8} {cell[0]['threads']:>7} {cell[0]['wait_policy']:>10} "
                  f"{seconds[side]:>10.3f} {ratio:>7.2f} {bound:>6.1f}  {goal}")
        print(f"{'':>8} default / server: {seconds[DEFAULT] / seconds[SERVER]:.2f}x")
    count = args.generation_sessions
    cached, uncached = (median(GENERATION, count, name) for name in ("cached", "uncached"))
    speedup = uncached / cached
    print(f"\ngeneration, {count} sessions at once on the server's plan: {args.new_tokens} "
          f"tokens after {args.prompt_tokens}: cached {cached:.2f} s, without the cache "
          f"{uncached:.2f} s, {speedup:.1f}x (goal >= {GENERATION_GOAL:g}x "
          f"{'met' if speedup >= GENERATION_GOAL else 'MISSED'})")


if __name__ == "__main__":
    main()
