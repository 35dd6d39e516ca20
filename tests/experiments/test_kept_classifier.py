"""The fine-tuned classifier kept on disk (models/experiments/kept_classifier.py): the first call
trains and writes; a fresh process reads it back without training and predicts what was saved;
a damaged copy is trained again, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from models.experiments import kept_classifier
from models.experiments.finetune import (PRETRAINED, SCRATCH, FinetuneSettings,
                                         held_out_probabilities)
from models.experiments.kept_classifier import (SUMMARY_FILE, WEIGHTS_FILE, cache_folder,
                                                cache_key, is_kept, load_or_train)
from models.experiments.labelled_data import load_shipped

ROOT = Path(__file__).resolve().parents[2]
# A few seeded steps: enough to move the weights, not a real fine-tuning.
QUICK = FinetuneSettings(encoder=PRETRAINED, epochs=1, max_steps=2, seed=3)
QUICK_SCRATCH = FinetuneSettings(encoder=SCRATCH, epochs=1, max_steps=1, learning_rate=2e-3)

# Run in a fresh interpreter: the trainer raises, so only reading from disk can succeed.
READ_BACK = """
import sys
import numpy as np
from pathlib import Path
from models.experiments import kept_classifier
from models.experiments.finetune import FinetuneSettings, held_out_probabilities
from models.experiments.labelled_data import load_shipped
from models.loading.pretrained import DEFAULT_MODEL, load_pretrained

def refuse(*args, **kwargs):
    raise AssertionError("trained again instead of reading the kept classifier")

kept_classifier.finetune = refuse
settings = FinetuneSettings(**{settings})
loaded, data = load_pretrained(DEFAULT_MODEL), load_shipped()
obtained = kept_classifier.load_or_train(loaded.model, loaded.tokenizer, data, settings,
                                         {key!r}, cache_dir=Path(sys.argv[1]))
assert not obtained.trained
texts, _ = data.part(held_out=True)
np.save(sys.argv[2], held_out_probabilities(obtained.result.classifier, loaded.tokenizer, texts,
                                            settings.max_tokens))
np.save(sys.argv[3], obtained.result.held_out_after)
print(len(obtained.result.step_losses), obtained.result.held_out_accuracy)
"""


@pytest.fixture
def counted(monkeypatch) -> list[int]:
    """Counts the trainings load_or_train runs (the real trainer, counted)."""
    calls: list[int] = []
    real = kept_classifier.finetune

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(kept_classifier, "finetune", counting)
    return calls


def test_first_use_trains_and_a_fresh_process_reads_it_back(default_model, tmp_path, counted):
    data = load_shipped()
    key = cache_key("embedded:test", data, QUICK)
    assert not is_kept(key, tmp_path)
    first = load_or_train(default_model.model, default_model.tokenizer, data, QUICK, key,
                          cache_dir=tmp_path)
    assert first.trained and counted == [1] and is_kept(key, tmp_path)
    assert len(first.result.step_losses) == 2
    saved = first.result.held_out_after
    assert saved.shape == (data.held_out_size, 2)
    assert not np.allclose(saved, first.result.held_out_before, atol=1e-4)  # training moved it

    shown, stored = tmp_path / "shown.npy", tmp_path / "stored.npy"
    script = READ_BACK.format(settings=repr(dict(encoder=PRETRAINED, epochs=1, max_steps=2, seed=3)),
                              key=key)
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path), str(shown), str(stored)],
                          cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["2", repr(first.result.held_out_accuracy)]
    np.testing.assert_allclose(np.load(stored), saved, atol=0, rtol=0)
    np.testing.assert_allclose(np.load(shown), saved, atol=1e-5)

    again = load_or_train(default_model.model, default_model.tokenizer, data, QUICK, key,
                          cache_dir=tmp_path)
    assert not again.trained and counted == [1]
    texts, _ = data.part(held_out=True)
    np.testing.assert_allclose(held_out_probabilities(again.result.classifier,
                                                      default_model.tokenizer, texts, 64),
                               saved, atol=1e-5)
    np.testing.assert_array_equal(again.result.initial_head.weight.detach().numpy(),
                                  first.result.initial_head.weight.detach().numpy())
    assert again.result.epochs == first.result.epochs


def _truncate(folder: Path) -> None:
    weights = folder / WEIGHTS_FILE
    weights.write_bytes(weights.read_bytes()[:1000])


def _garble_summary(folder: Path) -> None:
    (folder / SUMMARY_FILE).write_text("{not json")


def _drop_weights(folder: Path) -> None:
    (folder / WEIGHTS_FILE).unlink()


def _other_weights(folder: Path) -> None:
    """Weights that load but are not the ones that made the saved predictions."""
    import torch
    from safetensors.torch import load_file, save_file
    tensors = load_file(str(folder / WEIGHTS_FILE))
    tensors["head.bias"] = tensors["head.bias"] + torch.tensor([1.0, -1.0])  # not a shift of both
    save_file(tensors, str(folder / WEIGHTS_FILE))


def _older_layout(folder: Path) -> None:
    summary = json.loads((folder / SUMMARY_FILE).read_text())
    (folder / SUMMARY_FILE).write_text(json.dumps({**summary, "format": 0}))


@pytest.mark.parametrize("damage", [_truncate, _garble_summary, _drop_weights, _other_weights,
                                    _older_layout])
def test_a_damaged_copy_is_trained_again(default_model, tmp_path, counted, damage):
    data = load_shipped()
    key = cache_key("embedded:test", data, QUICK_SCRATCH)
    tokenizer = default_model.tokenizer
    first = load_or_train(default_model.model, tokenizer, data, QUICK_SCRATCH, key,
                          cache_dir=tmp_path)
    damage(cache_folder(key, tmp_path))
    again = load_or_train(default_model.model, tokenizer, data, QUICK_SCRATCH, key,
                          cache_dir=tmp_path)
    assert again.trained and counted == [1, 1]
    np.testing.assert_allclose(again.result.held_out_after, first.result.held_out_after,
                               atol=1e-5)  # seeded: the same model again
    read = load_or_train(default_model.model, tokenizer, data, QUICK_SCRATCH, key,
                         cache_dir=tmp_path)
    assert not read.trained and counted == [1, 1]


def test_a_partial_folder_is_not_a_kept_copy(default_model, tmp_path, counted):
    """A training interrupted while writing leaves a folder without its summary (written last)."""
    data = load_shipped()
    key = cache_key("embedded:test", data, QUICK_SCRATCH)
    folder = cache_folder(key, tmp_path)
    folder.mkdir(parents=True)
    (folder / WEIGHTS_FILE).write_bytes(b"half a file")
    assert not is_kept(key, tmp_path)
    obtained = load_or_train(default_model.model, default_model.tokenizer, data, QUICK_SCRATCH,
                             key, cache_dir=tmp_path)
    assert obtained.trained and counted == [1] and is_kept(key, tmp_path)


def test_only_the_most_recently_used_copies_stay(tmp_path):
    for number in range(4):
        folder = tmp_path / f"{kept_classifier.CACHE_PREFIX}-{number}"
        folder.mkdir()
        (folder / SUMMARY_FILE).write_text("{}")
        os.utime(folder / SUMMARY_FILE, (number, number))
    newest = tmp_path / f"{kept_classifier.CACHE_PREFIX}-new"
    kept_classifier._prune(newest, tmp_path, limit=3)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [f"{kept_classifier.CACHE_PREFIX}-2", f"{kept_classifier.CACHE_PREFIX}-3"]
