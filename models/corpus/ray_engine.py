"""The corpus job on Ray: Ray Data hands the planned batches to a pool of actors, each of which
loads the model once and calls `measure_batch` (the very function the in-process job calls) on
the batches it is given; the driver writes the results block by block, in batch order, with the
same BlockWriter as in-process, so both engines write the same files.

`--engine ray` alone starts a local Ray on this machine (a logical CPU more than the actors:
with as many CPUs as actors, Ray Data's read stage waits for a free slot forever); with an
address it joins that cluster, whose nodes must have this project and the model installed.
What travels: each batch's texts to an actor (pickled), each batch's measures back (a few KB a
passage, plus its sampled vectors); the model's weights never leave a node. Ray is optional:
without it, asking for it says how to install it.
"""

from __future__ import annotations

import os
import pickle
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from models.corpus.batch_pass import BatchSetup, measure_batch
from models.corpus.blocks import BlockWriter
from models.corpus.plan import PlannedBatch, planned_batches
from models.limits import CORPUS_RAY_CHUNK_PASSAGES
from models.threads import HUGE_PAGES_VARIABLE, WAIT_POLICY_VARIABLE

RAY_PIN = "ray[data]==2.60.0"
RAY_MISSING = (f"Ray is not installed here: install it with pip install '{RAY_PIN}' (or run "
               "scripts/setup.sh test) to run a corpus on Ray.")
CONNECT_SECONDS = 5  # how long a cluster's address has to answer
GCS_PORT, CLIENT_PORT = 6379, 10001  # Ray's default ports: `ray start --head`, ray://
LOCAL_ACTORS = 2
PASSED_ENVIRONMENT = ("ATTENTION_EXPLORER_CACHE", "HF_HUB_OFFLINE", "HF_HOME",
                      "TOKENIZERS_PARALLELISM", WAIT_POLICY_VARIABLE, HUGE_PAGES_VARIABLE)
PROJECT = Path(__file__).resolve().parents[2]


def check_ray(address: str | None) -> None:
    """ValueError with one sentence when Ray is missing or nothing answers at `address`."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ValueError(RAY_MISSING) from None
    if address and address != "auto":
        _answers(address)


def _answers(address: str) -> None:
    client = address.startswith("ray://")
    rest = address.removeprefix("ray://")
    host, _, port = rest.rpartition(":") if ":" in rest else (rest, "", "")
    try:
        number = int(port) if port else (CLIENT_PORT if client else GCS_PORT)
        with socket.create_connection((host or "127.0.0.1", number), timeout=CONNECT_SECONDS):
            return
    except (OSError, ValueError):
        raise ValueError(f"No Ray cluster answers at {address}: check the address, or start one "
                         "with `ray start --head`.") from None


class CorpusWorker:
    """A Ray actor: loads the model once, then measures the batches it is handed."""

    def __init__(self, model: str, setup: BatchSetup, threads: int = 1):
        from models.loading.source import load
        from models.threads import configure_threads

        configure_threads(threads=threads)
        self.loaded = load(model)
        self.setup = setup

    def __call__(self, rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        results = [pickle.dumps(measure_batch(self.loaded, pickle.loads(batch), self.setup))
                   for batch in rows["batch"]]
        return {"result": np.array(results, dtype=object)}


def _chunks(work: Path, blocks: set[int]) -> Iterator[list[PlannedBatch]]:
    """The remaining batches, CORPUS_RAY_CHUNK_PASSAGES passages (whole batches) at a time."""
    chunk: list[PlannedBatch] = []
    passages = 0
    for batch in planned_batches(work, blocks):
        chunk.append(batch)
        passages += len(batch)
        if passages >= CORPUS_RAY_CHUNK_PASSAGES:
            yield chunk
            chunk, passages = [], 0
    if chunk:
        yield chunk


def run_on_ray(model: str, work: Path, blocks: set[int], setup: BatchSetup,
               writer: BlockWriter, measured: Callable[[int], None],
               address: str | None = None, actors: int | None = None) -> None:
    """Measure the batches of `blocks` on Ray (see the module doc), handing each result to
    `writer` in batch order and telling `measured(passages)` after each."""
    import ray

    started_here = not ray.is_initialized()
    if started_here:
        environment = {name: os.environ[name] for name in PASSED_ENVIRONMENT
                       if name in os.environ}
        environment.update(PYTHONPATH=os.pathsep.join(
            [str(PROJECT), *filter(None, [os.environ.get("PYTHONPATH")])]),
            OMP_NUM_THREADS="1")
        options = dict(include_dashboard=False, log_to_driver=False,
                       runtime_env={"env_vars": environment})
        if address:
            ray.init(address=address, **options)
        else:
            ray.init(num_cpus=(actors or LOCAL_ACTORS) + 1, **options)
    try:
        pool = actors or max(1, int(ray.cluster_resources().get("CPU", 2)) - 1)
        context = ray.data.DataContext.get_current()
        context.execution_options.preserve_order = True
        context.enable_progress_bars = False
        for chunk in _chunks(work, blocks):
            dataset = ray.data.from_items([{"batch": pickle.dumps(batch)} for batch in chunk])
            results = dataset.map_batches(
                CorpusWorker, batch_size=1, num_cpus=1,
                compute=ray.data.ActorPoolStrategy(size=min(pool, len(chunk))),
                fn_constructor_kwargs={"model": model, "setup": setup})
            for row in results.iter_rows():
                result = pickle.loads(row["result"])
                writer.add(result)
                measured(len(result.passages))
    finally:
        if started_here:
            ray.shutdown()
