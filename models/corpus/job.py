"""A corpus job: every head of a model measured over every passage of a file, in-process or on
Ray, written to an output folder (models.corpus.outputs) that a page, a notebook or another
machine reads (models.corpus.result).

    run_corpus("passages.txt", "out/", model="encoder")

The job plans once (models.corpus.plan), then runs each planned batch through `measure_batch`
(models.corpus.batch_pass) and writes the results block by block (models.corpus.blocks). Its
work folder (`out/.work/`) holds the plan and the finished blocks: a job started again on the
same corpus, model and settings runs only the blocks that are missing. An output folder holding
another job's files, or anything else, is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from models.corpus.batch_pass import BatchSetup, measure_batch
from models.corpus.blocks import BlockWriter, done_blocks
from models.corpus.engines import ENGINES, LOCAL, RAY
from models.corpus.heap import batch_heap, release_slack
from models.corpus.outputs import SUMMARY, assemble
from models.corpus.plan import TEXTS_FILE, Plan, make_plan, planned_batches
from models.corpus.reading import CorpusFile, describe
from models.corpus.sampling import sampling_for
from models.limits import CORPUS_BATCH_SIZE
from models.store.byte_cache import map_large_blocks

WORK = ".work"
JOB_FILE = "job.json"
PROJECT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class JobProgress:
    """How far a job is: passages done of `total`, after `seconds` (this run's)."""

    done: int
    total: int
    seconds: float
    done_this_run: int

    @property
    def rate(self) -> float:
        """Passages per second in this run."""
        return self.done_this_run / self.seconds if self.seconds > 0 else 0.0

    @property
    def seconds_left(self) -> float | None:
        return (self.total - self.done) / self.rate if self.rate > 0 else None

    def line(self) -> str:
        """One line for a terminal: done, rate and time left."""
        left = self.seconds_left
        tail = f", about {left:,.0f} s left" if left is not None else ""
        return (f"{self.done:,} of {self.total:,} passages, {self.rate:,.1f} passages/s"
                f"{tail}")


Progress = Callable[[JobProgress], None]


@dataclass(frozen=True)
class JobSettings:
    """What a job's results depend on besides the corpus and the model."""

    batch_size: int = CORPUS_BATCH_SIZE
    max_tokens: int | None = None
    limit: int | None = None
    seed: int = 0


def app_version() -> str:
    """The installed package's version, else the checkout's pyproject.toml's."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("attention-explorer")
    except PackageNotFoundError:
        import tomllib

        with (PROJECT / "pyproject.toml").open("rb") as handle:
            return str(tomllib.load(handle)["project"]["version"])


def _identity(corpus: CorpusFile, loaded, settings: JobSettings) -> dict:
    return {"corpus": {"name": corpus.name, "bytes": corpus.bytes, "sha256": corpus.sha256},
            "model": {"name": loaded.name, "label": loaded.label},
            "settings": asdict(settings)}


def _claim(out: Path, identity: dict) -> bool:
    """Make `out` this job's folder; True when it already holds this job's finished results.
    ValueError when it holds another job's, or files that are not a job's."""
    work = out / WORK
    summary = out / SUMMARY
    if summary.is_file():
        found = json.loads(summary.read_text(encoding="utf-8"))
        if found.get("job") == identity:
            return True
        raise ValueError(f"{out} already holds the analysis of another corpus, model or "
                         "settings: choose another output folder.")
    if (work / JOB_FILE).is_file():
        if json.loads((work / JOB_FILE).read_text(encoding="utf-8")) != identity:
            raise ValueError(f"{out} holds an unfinished job on another corpus, model or "
                             "settings: choose another output folder.")
        return False
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"{out} is not an empty folder: choose a new or empty output folder.")
    work.mkdir(parents=True, exist_ok=True)
    (work / JOB_FILE).write_text(json.dumps(identity, indent=2, sort_keys=True),
                                 encoding="utf-8")
    return False


def _block_passages(work: Path) -> dict[int, int]:
    """How many passages each block holds, from the plan's texts."""
    blocks = pq.read_table(work / TEXTS_FILE, columns=["block"]).column("block").to_numpy()
    numbers, counts = np.unique(blocks, return_counts=True)
    return {int(block): int(count) for block, count in zip(numbers, counts)}


def run_corpus(corpus_path: Path | str, out: Path | str, model: str = "encoder", loaded=None,
               settings: JobSettings = JobSettings(), most: int | None = None,
               engine: str = LOCAL, ray_address: str | None = None, actors: int | None = None,
               progress: Progress | None = None, name: str | None = None) -> dict:
    """Measure every head over the corpus at `corpus_path` and write `out` (see the module
    doc); returns what corpus.json holds. `loaded`: the model already loaded (else `model` is
    loaded by name, models.loading.source.load); `most`: refuse a corpus of more passages;
    `engine` "local" (this process) or "ray" (a local Ray, or the cluster at `ray_address`,
    with `actors` workers); `name`: what the summary and every sentence call the corpus (the
    name a person uploaded it under), by default the file's own."""
    if engine not in ENGINES:
        raise ValueError(f"'{engine}' is not an engine: use {' or '.join(ENGINES)}.")
    if engine == RAY:
        from models.corpus.ray_engine import check_ray

        check_ray(ray_address)
    corpus = describe(corpus_path, name)
    map_large_blocks()
    if loaded is None:
        from models.loading.source import load

        loaded = load(model)
    out = Path(out)
    identity = _identity(corpus, loaded, settings)
    if _claim(out, identity):
        return json.loads((out / SUMMARY).read_text(encoding="utf-8"))
    work = out / WORK
    started = time.perf_counter()
    plan = Plan.load(work)
    if plan is None:
        try:
            plan = make_plan(loaded, corpus, work, settings.batch_size, settings.max_tokens,
                             settings.limit, most)
        except BaseException:  # a bad corpus leaves no job behind
            shutil.rmtree(work, ignore_errors=True)
            if out.is_dir() and not any(out.iterdir()):
                out.rmdir()
            raise
    setup = BatchSetup(plan.token_limit, sampling_for(plan, settings.seed))
    sizes = _block_passages(work)
    finished = done_blocks(work)
    remaining = set(range(plan.blocks)) - finished
    already = sum(sizes[block] for block in finished)
    counted = {"done": 0}

    def measured(passages: int) -> None:
        counted["done"] += passages
        if progress is not None:
            progress(JobProgress(already + counted["done"], plan.passages,
                                 time.perf_counter() - started, counted["done"]))

    if remaining:
        writer = BlockWriter(work)
        try:
            if engine == LOCAL:
                with batch_heap():  # a batch's blocks reused within it (models.corpus.heap)
                    for batch in planned_batches(work, remaining):
                        writer.add(measure_batch(loaded, batch, setup))
                        release_slack()  # what the batch freed, beyond a bounded slack
                        measured(len(batch))
            else:
                from models.corpus.ray_engine import run_on_ray

                run_on_ray(model, work, remaining, setup, writer, measured, ray_address,
                           actors)
            writer.flush()
        except BaseException:
            writer.close(quiet=True)  # the job's own error is the one reported
            raise
        writer.close()
    summary = {"job": identity, "app_version": app_version(), "engine": engine,
               "model": {**identity["model"], "causal": bool(loaded.causal),
                         **asdict(plan.shape)},
               "corpus": {**identity["corpus"], "passages": plan.passages,
                          "tokens": plan.tokens, "truncated_passages": plan.truncated,
                          "dropped_tokens": plan.dropped_tokens,
                          "token_limit": plan.token_limit},
               "seconds": round(time.perf_counter() - started, 3)}
    contents = assemble(work, out, plan, summary)
    shutil.rmtree(work, ignore_errors=True)
    return contents


def is_finished(out: Path | str) -> bool:
    """Whether `out` holds a finished analysis (its corpus.json is in place)."""
    return os.path.isfile(Path(out) / SUMMARY)
