"""The masked LM pretrained here (models/experiments/masked_lm.py): pretrained once with a progress
bar and kept on disk, read once per server, and its traces kept like any model's."""

from __future__ import annotations

from models.experiments import masked_lm
from models.hooks.trace import Trace
from models.loading.kinds import MASKED_LM
from models.loading.kinds.masked_lm import masked_lm_runner, settings_for
from models.loading.pretrained import DEFAULT_MODEL
from models.loading.source import LoadedSource, ModelSource
from models.store import stores
from models.store.keys import result_key
from ui import cache
from ui.byte_caches import kept
from ui.views import progress_bar


def _tokenizer_model():
    return cache.pretrained(DEFAULT_MODEL)


def disk_key(seed: int) -> str:
    """The kept copy's key: the settings, the corpus and the tokenizer."""
    return masked_lm.cache_key(_tokenizer_model().tokenizer, masked_lm.read_corpus(),
                               settings_for(seed))


def is_pretrained(seed: int) -> bool:
    """Whether this machine keeps the masked LM of `seed` on disk (no training needed)."""
    return masked_lm.is_kept(disk_key(seed))


def _pretrain_or_read(seed: int) -> masked_lm.Pretrained:
    tokenizer = _tokenizer_model().tokenizer
    if is_pretrained(seed):
        return masked_lm.pretrained(tokenizer, settings=settings_for(seed))
    with progress_bar("Pretraining the masked LM on the corpus (once per machine)") as progress:
        return masked_lm.pretrained(tokenizer, settings=settings_for(seed),
                                    progress=lambda step, total, loss: progress(step, total))


def pretrained(seed: int) -> masked_lm.Pretrained:
    """The masked LM of `seed`: read from disk, or pretrained now with a progress bar."""
    return kept(stores.SCRATCH_MODELS, result_key("masked-lm", disk_key(seed)),
                lambda: _pretrain_or_read(seed), "Reading the pretrained masked LM…")


def runner(seed: int) -> LoadedSource:
    base = _tokenizer_model()
    return masked_lm_runner(ModelSource(MASKED_LM, DEFAULT_MODEL, seed), pretrained(seed),
                            base.tokenizer, base.max_tokens)


def trace(seed: int, text: str) -> Trace:
    """The masked LM's trace of `text` (its attention and its fillers of every [MASK])."""
    loaded = runner(seed)
    return kept(stores.TRACES, result_key("masked-lm trace", disk_key(seed), text),
                lambda: loaded.run(text), "Running the masked LM…")


def recipe_example(passage: str, seed: int) -> masked_lm.RecipeExample:
    return masked_lm.recipe_example(_tokenizer_model().tokenizer, passage, seed)
