"""A small BERT-style masked language model, pretrained here on the shipped corpus by BERT's recipe.

The recipe (Devlin et al. 2019, as the chapters teach it): 15% of the ordinary tokens of every
passage are chosen; of the chosen, 80% are replaced by [MASK], 10% by a random token and 10% are
kept as they are; the loss is the cross-entropy of the original token at the chosen positions
only. Next-sentence prediction, BERT's second task, is not trained (RoBERTa showed it is not
needed); the lessons explain it.

Training is seeded and reproducible; the result is written once under the app's cache folder
($ATTENTION_EXPLORER_CACHE, models/loading/conversion_cache.py), in a folder named after a hash of
the settings and the corpus, and read back by every later session, server or process. A thread
lock and a file lock make concurrent sessions wait for one training instead of each running
their own.

Dimensions: B batch, T tokens, N chosen positions, V vocabulary.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from models.loading.conversion_cache import cache_root
from models.scratch.config import EncoderConfig
from models.scratch.masked_lm import MaskedLanguageModel
from models.store.folder_lock import folder_lock

CORPUS_FILE = Path(__file__).resolve().parents[2] / "data" / "corpus.txt"
IGNORED = -100  # the label of a position the loss does not count (PyTorch's ignore_index)
CACHE_FORMAT = 1
CACHE_PREFIX = "masked-lm"
WEIGHTS_FILE = "model.safetensors"
SUMMARY_FILE = "training.json"  # written last: its presence marks a complete folder
SOURCE_LABEL = "masked LM (pretrained here)"

Progress = Callable[[int, int, float], None]  # (step, total steps, loss)


@dataclass(frozen=True)
class MaskingRecipe:
    """Which share of tokens is chosen, and what becomes of a chosen token: [MASK] (`masked`),
    a random token (`random`) or itself (the rest)."""

    chosen: float = 0.15
    masked: float = 0.8
    random: float = 0.1

    def __post_init__(self) -> None:
        for name in ("chosen", "masked", "random"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"MaskingRecipe.{name} must be between 0 and 1, got {value!r}")
        if self.masked + self.random > 1.0:
            raise ValueError("MaskingRecipe: masked and random shares add up to more than 1")

    @property
    def kept(self) -> float:
        return 1.0 - self.masked - self.random


@dataclass(frozen=True)
class MaskedBatch:
    """A batch after the recipe: what the model reads and what the loss asks for."""

    inputs: torch.Tensor  # (B, T) the ids the model reads
    labels: torch.Tensor  # (B, T) the original id at chosen positions, IGNORED elsewhere
    chosen: torch.Tensor  # (B, T) bool
    masked: torch.Tensor  # (B, T) bool, chosen and replaced by the mask token
    randomised: torch.Tensor  # (B, T) bool, chosen and replaced by a random token

    @property
    def kept(self) -> torch.Tensor:
        """(B, T) bool: chosen and left as it was."""
        return self.chosen & ~self.masked & ~self.randomised


def mask_tokens(input_ids: torch.Tensor, choosable: torch.Tensor, mask_id: int, vocab_size: int,
                generator: torch.Generator, recipe: MaskingRecipe = MaskingRecipe()) -> MaskedBatch:
    """BERT's recipe on input_ids (B, T); only positions where `choosable` (B, T) is True (real,
    non-special tokens) can be chosen."""
    draw = torch.rand(input_ids.shape, generator=generator)  # (B, T)
    chosen = (draw < recipe.chosen) & choosable  # (B, T)
    fate = torch.rand(input_ids.shape, generator=generator)  # (B, T)
    masked = chosen & (fate < recipe.masked)
    randomised = chosen & (fate >= recipe.masked) & (fate < recipe.masked + recipe.random)
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator)  # (B, T)
    inputs = input_ids.masked_fill(masked, mask_id)
    inputs = torch.where(randomised, random_ids, inputs)
    labels = input_ids.masked_fill(~chosen, IGNORED)
    return MaskedBatch(inputs, labels, chosen, masked, randomised)


def masked_lm_loss(model: MaskedLanguageModel, batch: MaskedBatch,
                   attention_mask: torch.Tensor) -> torch.Tensor:
    """The mean cross-entropy of the original tokens at the chosen positions only; the head runs
    on those positions alone (a vocabulary-wide score at every position would be wasted)."""
    hidden = model.hidden(batch.inputs, None, attention_mask)  # (B, T, D)
    logits = model.scores(hidden[batch.chosen])  # (N, V)
    return F.cross_entropy(logits, batch.labels[batch.chosen])


@dataclass(frozen=True)
class PretrainingSettings:
    """Everything that decides the trained weights; the disk cache is keyed by all of it (and
    the corpus and tokenizer)."""

    seed: int = 0
    steps: int = 400
    batch_size: int = 32
    learning_rate: float = 2e-3
    warmup_steps: int = 40
    hidden_size: int = 64
    num_heads: int = 4
    num_layers: int = 2
    intermediate_size: int = 256
    max_tokens: int = 64  # a passage longer than this is cut
    dropout: float = 0.1
    # A model this small trains fastest on one torch thread here (the toy translator measured
    # 2-10x slower on two threads of this shared 2-core machine).
    threads: int = 1

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "max_tokens", "threads"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"PretrainingSettings.{name} must be a positive integer, "
                                 f"got {value!r}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate}")
        if not 0 <= self.warmup_steps < self.steps:
            raise ValueError(f"warmup_steps must be in [0, steps), got {self.warmup_steps}")
        self.model_config(1)  # the sizes are checked by the encoder's own config

    def model_config(self, vocab_size: int) -> EncoderConfig:
        return EncoderConfig(vocab_size=vocab_size, max_positions=self.max_tokens,
                             hidden_size=self.hidden_size, num_heads=self.num_heads,
                             num_layers=self.num_layers, intermediate_size=self.intermediate_size,
                             dropout=self.dropout, norm_style="post")  # post-norm, as BERT


DEFAULT_SETTINGS = PretrainingSettings()


@dataclass(frozen=True)
class Pretrained:
    """A masked LM pretrained here, with its loss after every step."""

    model: MaskedLanguageModel
    settings: PretrainingSettings
    losses: tuple[float, ...]
    passages: int
    tokens: int  # ordinary tokens in the corpus (the ones the recipe may choose)


def read_corpus(path: Path = CORPUS_FILE) -> tuple[str, ...]:
    """The shipped corpus: one passage a line, blank lines skipped."""
    return tuple(line.strip() for line in path.read_text(encoding="utf-8").splitlines()
                 if line.strip())


@dataclass(frozen=True)
class EncodedCorpus:
    input_ids: torch.Tensor  # (P, T) padded
    attention_mask: torch.Tensor  # (P, T) 1 = real token
    choosable: torch.Tensor  # (P, T) bool, real and not special


def encode_corpus(tokenizer, passages: tuple[str, ...], max_tokens: int) -> EncodedCorpus:
    encoded = tokenizer(list(passages), padding=True, truncation=True, max_length=max_tokens,
                        return_tensors="pt", return_special_tokens_mask=True)
    attention_mask = encoded["attention_mask"]  # (P, T)
    choosable = attention_mask.bool() & ~encoded["special_tokens_mask"].bool()
    return EncodedCorpus(encoded["input_ids"], attention_mask, choosable)


def _learning_rate(settings: PretrainingSettings, step: int) -> float:
    """Linear warm-up, then a linear decay to zero (BERT's schedule)."""
    if step < settings.warmup_steps:
        return settings.learning_rate * (step + 1) / settings.warmup_steps
    left = settings.steps - step
    return settings.learning_rate * left / (settings.steps - settings.warmup_steps)


def pretrain(tokenizer, passages: tuple[str, ...], settings: PretrainingSettings = DEFAULT_SETTINGS,
             progress: Progress | None = None) -> Pretrained:
    """Pretrain a masked LM from seeded random weights on `passages` by the recipe."""
    if not passages:
        raise ValueError("The corpus has no passage to pretrain on.")
    mask_id = tokenizer.mask_token_id
    if mask_id is None:
        raise ValueError("This tokenizer has no mask token, so it cannot pretrain a masked LM.")
    corpus = encode_corpus(tokenizer, passages, settings.max_tokens)
    threads = torch.get_num_threads()
    torch.set_num_threads(settings.threads)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(settings.seed)
            model = MaskedLanguageModel(settings.model_config(len(tokenizer)))
            generator = torch.Generator().manual_seed(settings.seed)
            optimiser = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate,
                                          weight_decay=0.01)
            model.train()
            losses = []
            count = corpus.input_ids.size(0)
            for step in range(settings.steps):
                rows = torch.randint(count, (settings.batch_size,), generator=generator)  # (B,)
                batch = mask_tokens(corpus.input_ids[rows], corpus.choosable[rows], mask_id,
                                    len(tokenizer), generator)
                if not bool(batch.chosen.any()):  # no position chosen: nothing to learn from
                    losses.append(losses[-1] if losses else float("nan"))
                    continue
                for group in optimiser.param_groups:
                    group["lr"] = _learning_rate(settings, step)
                loss = masked_lm_loss(model, batch, corpus.attention_mask[rows])
                optimiser.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimiser.step()
                losses.append(float(loss.detach()))
                if progress is not None:
                    progress(step + 1, settings.steps, losses[-1])
    finally:
        torch.set_num_threads(threads)
    return Pretrained(model.eval(), settings, tuple(losses), count,
                      int(corpus.choosable.sum()))


# --- kept on disk --------------------------------------------------------------------------------

_THREAD_LOCK = threading.Lock()


def cache_key(tokenizer, passages: tuple[str, ...], settings: PretrainingSettings) -> str:
    """A hash of everything that decides the weights: settings, corpus, tokenizer vocabulary."""
    digest = hashlib.sha256()
    digest.update(json.dumps({"format": CACHE_FORMAT, **asdict(settings)},
                             sort_keys=True).encode())
    digest.update("\n".join(passages).encode("utf-8"))
    digest.update(f"{len(tokenizer)}:{tokenizer.mask_token}:{type(tokenizer).__name__}".encode())
    return digest.hexdigest()[:16]


def cache_folder(key: str, cache_dir: Path | None = None) -> Path:
    return cache_root(cache_dir) / f"{CACHE_PREFIX}-{key}"


def is_kept(key: str, cache_dir: Path | None = None) -> bool:
    return (cache_folder(key, cache_dir) / SUMMARY_FILE).is_file()


def _training_lock(folder: Path):
    return folder_lock(folder, _THREAD_LOCK)


def save(pretrained: Pretrained, folder: Path) -> None:
    """Weights and a summary into a temporary folder, renamed to `folder` when complete."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}.partial-{os.getpid()}-",
                                    dir=folder.parent))
    try:
        save_file({k: v.contiguous() for k, v in pretrained.model.state_dict().items()},
                  str(partial / WEIGHTS_FILE))
        summary = {"format": CACHE_FORMAT, "settings": asdict(pretrained.settings),
                   "vocab_size": pretrained.model.config.vocab_size,
                   "losses": list(pretrained.losses), "passages": pretrained.passages,
                   "tokens": pretrained.tokens}
        (partial / SUMMARY_FILE).write_text(json.dumps(summary), encoding="utf-8")
        if folder.exists():
            shutil.rmtree(folder)
        partial.rename(folder)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def load(folder: Path) -> Pretrained:
    """A masked LM kept on disk; OSError, KeyError or ValueError when the folder is not one."""
    summary = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))
    if summary.get("format") != CACHE_FORMAT:
        raise ValueError("the kept masked LM has an older layout")
    settings = PretrainingSettings(**summary["settings"])
    model = MaskedLanguageModel(settings.model_config(int(summary["vocab_size"])))
    model.load_state_dict(load_file(str(folder / WEIGHTS_FILE)))
    return Pretrained(model.eval(), settings, tuple(float(x) for x in summary["losses"]),
                      int(summary["passages"]), int(summary["tokens"]))


def pretrained(tokenizer, passages: tuple[str, ...] | None = None,
               settings: PretrainingSettings = DEFAULT_SETTINGS,
               progress: Progress | None = None, cache_dir: Path | None = None) -> Pretrained:
    """The masked LM for these settings: read from disk when kept, else pretrained now (with
    `progress`) and kept. The shipped corpus unless `passages` are given."""
    passages = read_corpus() if passages is None else passages
    folder = cache_folder(cache_key(tokenizer, passages, settings), cache_dir)
    with _training_lock(folder):
        if (folder / SUMMARY_FILE).is_file():
            try:
                return load(folder)
            except (OSError, KeyError, ValueError, TypeError, RuntimeError):
                shutil.rmtree(folder, ignore_errors=True)  # a damaged copy is trained again
        result = pretrain(tokenizer, passages, settings, progress)
        save(result, folder)
        return result


NOT_CHOSEN, MASKED, RANDOM, KEPT = "not chosen", "masked", "random", "kept"


@dataclass(frozen=True)
class RecipeExample:
    """One passage after the recipe: its tokens, what the model reads at each position, and
    each position's fate (NOT_CHOSEN, MASKED, RANDOM or KEPT)."""

    tokens: tuple[str, ...]
    read: tuple[str, ...]
    fates: tuple[str, ...]


def recipe_example(tokenizer, passage: str, seed: int,
                   recipe: MaskingRecipe = MaskingRecipe()) -> RecipeExample:
    """One passage through the recipe, seeded."""
    corpus = encode_corpus(tokenizer, (passage,), DEFAULT_SETTINGS.max_tokens)
    generator = torch.Generator().manual_seed(seed)
    batch = mask_tokens(corpus.input_ids, corpus.choosable, tokenizer.mask_token_id,
                        len(tokenizer), generator, recipe)
    fates = tuple(MASKED if m else RANDOM if r else KEPT if k else NOT_CHOSEN
                  for m, r, k in zip(batch.masked[0].tolist(), batch.randomised[0].tolist(),
                                     batch.kept[0].tolist()))
    return RecipeExample(tuple(tokenizer.convert_ids_to_tokens(corpus.input_ids[0].tolist())),
                         tuple(tokenizer.convert_ids_to_tokens(batch.inputs[0].tolist())), fates)


# --- next-sentence prediction: BERT's second task, shown, not trained -------------------------------

NSP_SPLITS = ("; ", ", ")  # where a passage of the corpus splits into two parts that follow


@dataclass(frozen=True)
class SentencePair:
    """Two parts as BERT reads them ([CLS] first [SEP] second [SEP]) and whether the second is
    the one that really followed the first (IsNext) or a part of another passage (NotNext)."""

    first: str
    second: str
    is_next: bool


def _halves(passage: str) -> tuple[str, str] | None:
    for mark in NSP_SPLITS:
        first, found, second = passage.partition(mark)
        if found and first.strip() and second.strip():
            return first.strip(), second.strip()
    return None


def next_sentence_pairs(passages: tuple[str, ...], count: int, seed: int) -> tuple[SentencePair, ...]:
    """`count` training pairs for next-sentence prediction, half of them (by a seeded coin) a
    passage's two parts in order, the others a first part with another passage's second part."""
    split = [halves for halves in map(_halves, passages) if halves is not None]
    if len(split) < 2:
        raise ValueError("Next-sentence pairs need at least two passages that split in two.")
    generator = torch.Generator().manual_seed(seed)
    pairs = []
    for _ in range(count):
        own = int(torch.randint(len(split), (1,), generator=generator))
        is_next = bool(torch.rand(1, generator=generator) < 0.5)
        other = own
        while not is_next and other == own:
            other = int(torch.randint(len(split), (1,), generator=generator))
        pairs.append(SentencePair(split[own][0], split[other][1], is_next))
    return tuple(pairs)
