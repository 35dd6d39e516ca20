"""What the app otherwise builds the first time a page needs it, built ahead into the cache
folder: the embedded SmolLM2 converted to float32 (Generation, Predictions and every decoder
page: about 14 s here), the toy translator trained (Encoder-decoder attention: about 8 s) and the
shipped corpus analysed with the default encoder (Corpus: about 2 s). `attention-explorer
prepare` runs it before a class (so that no student waits for a first open) and the test setup
runs it once, so the browser tests time pages, not one-off training. Each part that is already
in the cache is checked and left as it is; each is built by the same engine call the page makes
(conversion, training and corpus job keep their own locks, so a server running at the same
moment waits for the result instead of building it twice).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Say = Callable[[str], None]

# A part's progress is said at most once per this share of its work (a log, not a bar).
REPORT_EVERY = 0.25


@dataclass(frozen=True)
class Part:
    """One thing the cache can hold: what it is, whether it is there, how to build it."""

    name: str
    ready: Callable[[], bool]
    build: Callable[[Callable[[float], None]], None]


def _decoder_ready() -> bool:
    from models.loading.conversion import converted_folder
    from models.loading.conversion_cache import is_complete

    return is_complete(converted_folder())


def _convert(done: Callable[[float], None]) -> None:
    from models.loading.conversion import prepare_default_decoder

    prepare_default_decoder(lambda fraction, message: done(fraction))


def _translator_ready() -> bool:
    from models.teaching.trained_translator import TrainingSettings, is_cached

    return is_cached(TrainingSettings())


def _train(done: Callable[[float], None]) -> None:
    from models.teaching.seq2seq_training import load_or_train

    load_or_train(progress=lambda step, total, loss: done(step / max(total, 1)))


def _corpus_ready() -> bool:
    from models.corpus.job import is_finished
    from models.corpus.shipped import shipped_folder

    return is_finished(shipped_folder())


def _analyse(done: Callable[[float], None]) -> None:
    from models.corpus.job import run_corpus
    from models.corpus.shipped import SHIPPED_CORPUS, shipped_folder
    from models.loading.source import ModelSource

    run_corpus(SHIPPED_CORPUS, shipped_folder(), loaded=ModelSource.default().load(),
               progress=lambda state: done(state.done / max(state.total, 1)))


PARTS = (
    Part("the embedded SmolLM2, converted to float32", _decoder_ready, _convert),
    Part("the toy translator, trained", _translator_ready, _train),
    Part("the shipped corpus, analysed with the default encoder", _corpus_ready, _analyse),
)


def prepare(say: Say, parts: tuple[Part, ...] = PARTS) -> list[str]:
    """Build every part the cache lacks, saying what it does; returns the names of the parts
    built now (those already there are said to be so)."""
    built = []
    for part in parts:
        if part.ready():
            say(f"{part.name}: already in the cache")
            continue
        said = [0.0]

        def done(fraction: float, name: str = part.name) -> None:
            if fraction >= said[0] + REPORT_EVERY and fraction < 1.0:
                said[0] = fraction
                say(f"{name}: {fraction:.0%}")

        say(f"{part.name}: building…")
        part.build(done)
        if not part.ready():
            raise OSError(f"{part.name}: built, but the cache does not hold it (is the "
                               "cache folder writable and is the disk full?)")
        say(f"{part.name}: done")
        built.append(part.name)
    return built
