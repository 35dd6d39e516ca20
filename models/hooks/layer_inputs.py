"""Each layer's input (the residual stream entering it, hook_resid_pre) of one input, kept.

What grows with T x D is kept; what grows with H x T x T is derived on demand: from a layer's
input, that layer runs again alone (the layers before it skipped, models/hooks/run.py LayerPlan)
and gives back any of its points exactly (its maps, some rows of them, its head outputs, its MLP
output, the logits after it). A short input keeps the inputs in memory beside its trace; a long
one writes them to disk while it streams (SmolLM2 at 4,096 tokens: 30 x 9.4 MB), never holding
them in the server's memory.

Dimensions: T tokens, D model width.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import torch


class LayerInputs:
    """Each layer's input (T, D) float32 of batch item 0, written to files in `folder`; `delete`
    removes them."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    def path(self, layer: int) -> Path:
        return self.folder / f"layer-{layer}.npy"

    def save(self, layer: int, hidden: torch.Tensor) -> None:
        np.save(self.path(layer), hidden[0].detach().float().numpy())

    def load(self, layer: int) -> torch.Tensor:
        """(1, T, D) the input of `layer`."""
        return torch.from_numpy(np.load(self.path(layer)))[None]

    def has(self, layer: int) -> bool:
        return self.path(layer).is_file()

    @property
    def disk_bytes(self) -> int:
        return sum(path.stat().st_size for path in self.folder.glob("layer-*.npy"))

    @property
    def nbytes(self) -> int:
        return 0  # on disk: nothing in memory

    def delete(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class KeptInputs:
    """Each layer's input (T, D) float32 of batch item 0, held in memory (a short input's)."""

    def __init__(self, inputs: dict[int, np.ndarray] | None = None):
        self._inputs: dict[int, np.ndarray] = dict(inputs or {})
        for array in self._inputs.values():
            array.setflags(write=False)

    def save(self, layer: int, hidden: torch.Tensor) -> None:
        array = hidden[0].detach().float().numpy()
        array.setflags(write=False)
        self._inputs[layer] = array

    def load(self, layer: int) -> torch.Tensor:
        return torch.from_numpy(self._inputs[layer].copy())[None]

    def array(self, layer: int) -> np.ndarray:
        """(T, D) read-only, no copy."""
        return self._inputs[layer]

    def has(self, layer: int) -> bool:
        return layer in self._inputs

    @property
    def nbytes(self) -> int:
        return sum(array.nbytes for array in self._inputs.values())

    def delete(self) -> None:
        self._inputs.clear()
