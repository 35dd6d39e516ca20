"""Fine-tuned classifiers kept on disk: trained once per machine, read back by every later
session, server or process.

A trained classifier (its weights, the head it started from), its history and the held-out
sentences' class probabilities before and after training are written under the app's cache
folder ($ATTENTION_EXPLORER_CACHE, models/loading/conversion_cache.py), in a folder named after
a hash of the encoder, the data and the settings. The folder is written under a temporary name
and renamed when complete; the summary is written last. A thread lock and a file lock
(models/store/folder_lock.py) make two sessions or two server processes wait for one training.
A copy that cannot be read back, or that does not reproduce its own saved predictions, is
deleted and trained again. At most `models.limits.FINETUNED_ON_DISK` copies are kept.

Dimensions: N held-out sentences, C classes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from models.experiments.classifier import (SequenceClassifier, pretrained_classifier,
                                           scratch_classifier, scratch_encoder_config)
from models.experiments.finetune import (PRETRAINED, EpochResult, FinetuneResult,
                                         FinetuneSettings, Progress, finetune,
                                         held_out_probabilities)
from models.experiments.labelled_data import LabelledData
from models.limits import FINETUNED_ON_DISK
from models.loading.conversion_cache import cache_root
from models.store.folder_lock import folder_lock

CACHE_FORMAT = 1  # bump when the folder's layout changes
CACHE_PREFIX = "classifier"
WEIGHTS_FILE = "classifier.safetensors"
SUMMARY_FILE = "training.json"  # written last: its presence marks a complete folder
HEAD_PREFIX = "initial_head."
BEFORE, AFTER = "held_out_before", "held_out_after"
CHECKED_SENTENCES = 4  # held-out sentences run again on reading, against the saved predictions
CHECK_TOLERANCE = 1e-4  # float32, a batch of 4 against the batch of all N: a few ulps apart
UNREADABLE = (OSError, KeyError, ValueError, TypeError, RuntimeError, SafetensorError)

_THREAD_LOCK = threading.Lock()


@dataclass(frozen=True)
class Obtained:
    """A fine-tuned classifier, and whether it was trained now (False: read from disk)."""

    result: FinetuneResult
    trained: bool


def cache_key(encoder_identity: str, data: LabelledData, settings: FinetuneSettings) -> str:
    """A hash of everything that decides the weights: the encoder, the data, the settings."""
    text = json.dumps({"format": CACHE_FORMAT, "encoder": encoder_identity,
                       "data": data.fingerprint, "settings": asdict(settings)}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def cache_folder(key: str, cache_dir: Path | None = None) -> Path:
    return cache_root(cache_dir) / f"{CACHE_PREFIX}-{key}"


def is_kept(key: str, cache_dir: Path | None = None) -> bool:
    return (cache_folder(key, cache_dir) / SUMMARY_FILE).is_file()


def fresh_classifier(model: nn.Module, vocab_size: int, num_classes: int,
                     settings: FinetuneSettings) -> SequenceClassifier:
    """The untrained classifier `settings` start from: a copy of `model` (the pretrained
    encoder) or a seeded from-scratch encoder over a vocabulary of `vocab_size`, a fresh head."""
    if settings.encoder == PRETRAINED:
        return pretrained_classifier(model, num_classes, settings.pooling, settings.seed)
    return scratch_classifier(scratch_encoder_config(vocab_size), num_classes, settings.pooling,
                              settings.seed)


def save(result: FinetuneResult, folder: Path) -> None:
    """Weights, probabilities and a summary into a temporary folder, renamed to `folder`."""
    if result.held_out_before is None or result.held_out_after is None:
        raise ValueError("a result without its held-out probabilities cannot be kept")
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}.partial-{os.getpid()}-",
                                    dir=folder.parent))
    try:
        tensors = {name: value.detach().contiguous().clone()
                   for name, value in result.classifier.state_dict().items()}
        tensors.update({HEAD_PREFIX + name: value.detach().contiguous().clone()
                        for name, value in result.initial_head.state_dict().items()})
        tensors[BEFORE] = torch.from_numpy(np.ascontiguousarray(result.held_out_before))
        tensors[AFTER] = torch.from_numpy(np.ascontiguousarray(result.held_out_after))
        save_file(tensors, str(partial / WEIGHTS_FILE))
        summary = {"format": CACHE_FORMAT, "settings": asdict(result.settings),
                   "epochs": [asdict(epoch) for epoch in result.epochs],
                   "step_losses": list(result.step_losses), "seconds": result.seconds,
                   "class_names": list(result.class_names),
                   "data_fingerprint": result.data_fingerprint,
                   "train_size": result.train_size, "held_out_size": result.held_out_size}
        (partial / SUMMARY_FILE).write_text(json.dumps(summary), encoding="utf-8")
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def load(folder: Path, model: nn.Module, tokenizer, data: LabelledData) -> FinetuneResult:
    """A classifier kept on disk, checked against its saved predictions on a few held-out
    sentences of `data`; one of UNREADABLE when the folder is not a complete, matching copy."""
    summary = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))
    if summary.get("format") != CACHE_FORMAT:
        raise ValueError("the kept classifier has an older layout")
    if summary["data_fingerprint"] != data.fingerprint:
        raise ValueError("the kept classifier was trained on other data")
    settings = FinetuneSettings(**summary["settings"])
    tensors = load_file(str(folder / WEIGHTS_FILE))
    class_names = tuple(summary["class_names"])
    classifier = fresh_classifier(model, len(tokenizer), len(class_names), settings)
    classifier.load_state_dict({name: value for name, value in tensors.items()
                                if not name.startswith(HEAD_PREFIX) and name not in (BEFORE, AFTER)})
    classifier.eval()
    initial_head = nn.Linear(classifier.head.in_features, classifier.head.out_features)
    initial_head.load_state_dict({name[len(HEAD_PREFIX):]: value for name, value in tensors.items()
                                  if name.startswith(HEAD_PREFIX)})
    before, after = tensors[BEFORE].numpy(), tensors[AFTER].numpy()  # (N, C) each
    texts, _ = data.part(held_out=True)
    if after.shape != (len(texts), len(class_names)):
        raise ValueError("the kept predictions do not match the held-out sentences")
    checked = held_out_probabilities(classifier, tokenizer, texts[:CHECKED_SENTENCES],
                                     settings.max_tokens)
    if not np.allclose(checked, after[:CHECKED_SENTENCES], atol=CHECK_TOLERANCE):
        raise ValueError("the kept classifier does not reproduce its own predictions")
    return FinetuneResult(
        classifier=classifier, initial_head=initial_head.eval(),
        epochs=tuple(EpochResult(**epoch) for epoch in summary["epochs"]),
        step_losses=tuple(float(x) for x in summary["step_losses"]),
        seconds=float(summary["seconds"]), settings=settings, class_names=class_names,
        data_fingerprint=summary["data_fingerprint"], train_size=int(summary["train_size"]),
        held_out_size=int(summary["held_out_size"]), held_out_before=before,
        held_out_after=after)


def _prune(keep: Path, cache_dir: Path | None, limit: int = FINETUNED_ON_DISK) -> None:
    """Delete the least recently used kept classifiers beyond `limit` (never `keep`)."""
    kept = [folder for folder in cache_root(cache_dir).glob(f"{CACHE_PREFIX}-*")
            if (folder / SUMMARY_FILE).is_file() and folder != keep]
    kept.sort(key=lambda folder: (folder / SUMMARY_FILE).stat().st_mtime, reverse=True)
    for folder in kept[max(0, limit - 1):]:
        shutil.rmtree(folder, ignore_errors=True)


def load_or_train(model: nn.Module, tokenizer, data: LabelledData, settings: FinetuneSettings,
                  key: str, progress: Progress | None = None,
                  cache_dir: Path | None = None) -> Obtained:
    """The classifier `key` names: read from disk when kept, else trained now from `model`
    (with `progress`) and kept. `key` is `cache_key(...)` of the encoder, data and settings."""
    folder = cache_folder(key, cache_dir)
    with folder_lock(folder, _THREAD_LOCK):
        if (folder / SUMMARY_FILE).is_file():
            try:
                result = load(folder, model, tokenizer, data)
                os.utime(folder / SUMMARY_FILE)  # recently used: pruned last
                return Obtained(result, trained=False)
            except UNREADABLE:
                shutil.rmtree(folder, ignore_errors=True)  # a damaged copy is trained again
        classifier = fresh_classifier(model, len(tokenizer), data.num_classes, settings)
        result = finetune(classifier, tokenizer, data, settings, progress)
        try:
            save(result, folder)
            _prune(folder, cache_dir)
        except OSError:
            pass  # a full or read-only disk: the classifier is still trained, just not kept
        return Obtained(result, trained=True)
