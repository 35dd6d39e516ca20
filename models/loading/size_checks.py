"""How large a model is, counted from the model its config builds, never from key spellings.

The model class is built from its config on PyTorch's meta device, where a tensor has a shape
and no storage: counting its parameters allocates nothing, whatever the config claims, and works
for any architecture transformers knows (bloom's `n_embed`, T5's `d_kv`, BART's
`decoder_layers`, XLNet's `d_inner`, a mixture's `moe_intermediate_size` alike). A config that
would build absurdly many tensors (millions of layers) is stopped while it builds. The count is
then checked against the server's budget, and the safetensors headers (read, data unread) must
hold at least as many numbers as the parameters they are to fill. All of it before any real
allocation.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from transformers import PretrainedConfig

from models.errors import ModelLoadError
from models.limits import MODEL_BYTES, SKELETON_TENSORS
from models.loading.loader_checks import readable_bytes
from models.loading.weight_checks import OPTIONAL_PARTS, safetensors_header

FLOAT32_BYTES = 4


class _TooManyTensors(Exception):
    """Raised inside a skeleton's construction once it has made SKELETON_TENSORS tensors."""


class _TensorCounter(TorchFunctionMode):
    """Counts the tensors torch functions make while a model is built, and stops the build when
    there are more than `limit` (each layer makes a few, so this bounds the layers too)."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit
        self.made = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if isinstance(result, torch.Tensor):
            self.made += 1
            if self.made > self.limit:
                raise _TooManyTensors
        return result


def skeleton(name: str, config: PretrainedConfig, model_class) -> nn.Module:
    """`model_class` built from `config` on the meta device: its parameters' shapes, no storage.

    Call it where models are built one at a time (loader_checks.loading_boundary): transformers
    sets process-wide defaults while it builds.
    """
    counter = _TensorCounter(SKELETON_TENSORS)
    try:
        with torch.device("meta"), counter:
            # a copy: from_config sets the attention implementation on the config it is given,
            # and a loaded model's own config would then stop running the hooked attention
            return model_class.from_config(copy.deepcopy(config), attn_implementation="eager",
                                           trust_remote_code=False)
    except _TooManyTensors:
        raise ModelLoadError(
            f"Could not load '{name}': its config.json builds more than {SKELETON_TENSORS:,} "
            "weight tensors, far more than any model this server can hold."
        ) from None


@dataclass(frozen=True)
class ModelSize:
    """What a built model would hold: `parameters` (tied ones once), `required` (those its weight
    files must fill: optional parts and, when only the base model must be covered, the head left
    out) and `buffer_bytes` (buffers at their own width, float32 at least)."""

    parameters: int
    required: int
    buffer_bytes: int

    @property
    def nbytes(self) -> int:
        return self.parameters * FLOAT32_BYTES + self.buffer_bytes


def _made_not_loaded(built: nn.Module, key: str, parameter: nn.Parameter) -> bool:
    """A parameter the model makes itself rather than loads: frozen (Marian's sinusoidal
    positions), one its class says a checkpoint may lack, or an optional part (a pooler)."""
    ignored = getattr(built, "_keys_to_ignore_on_load_missing", None) or ()
    return (not parameter.requires_grad or any(re.search(pattern, key) for pattern in ignored)
            or any(part in key.split(".") for part in OPTIONAL_PARTS))


def model_size(built: nn.Module, base_only: bool = False) -> ModelSize:
    """Count a (meta) model's parameters and buffers; see ModelSize."""
    prefix = f"{built.base_model_prefix}."
    parameters = required = 0
    for key, parameter in built.named_parameters():  # a tied parameter is listed once
        count = parameter.numel()
        parameters += count
        if not _made_not_loaded(built, key, parameter) and (not base_only
                                                            or key.startswith(prefix)):
            required += count
    buffer_bytes = sum(buffer.numel() * max(buffer.element_size(), FLOAT32_BYTES)
                       for buffer in built.buffers())
    return ModelSize(parameters, required, buffer_bytes)


def check_size(name: str, size: ModelSize, budget: int = MODEL_BYTES) -> None:
    """Refuse a model whose float32 parameters and buffers would take more than `budget`."""
    if size.nbytes > budget:
        raise ModelLoadError(
            f"Could not load '{name}': its config.json describes a model of about "
            f"{readable_count(size.parameters)} parameters ({readable_bytes(size.nbytes)} in "
            f"memory), more than this server's limit of {readable_bytes(budget)} per model."
        )


def stored_numbers(name: str, files: tuple[Path, ...]) -> int:
    """How many numbers the safetensors files hold, from their headers (data unread)."""
    return sum(math.prod(entry.shape) for path in files
               for entry in safetensors_header(name, path).values())


def check_weights_hold(name: str, size: ModelSize, files: tuple[Path, ...]) -> None:
    """Refuse, before building, a model whose weight files hold fewer numbers than the parameters
    they must fill: whatever their names, some parameters would keep their random values."""
    stored = stored_numbers(name, files)
    if stored < size.required:
        raise ModelLoadError(
            f"Could not load '{name}': its weights do not cover the model (its weight files hold "
            f"{stored:,} numbers for {size.required:,} parameters), so it would show randomly "
            "initialised attention."
        )


def checked_size(name: str, config: PretrainedConfig, model_class, files: tuple[Path, ...],
                 base_only: bool = False, budget: int = MODEL_BYTES) -> ModelSize:
    """The size of the model `model_class` builds from `config`, refused above `budget` or when
    `files` cannot fill it; nothing real is allocated."""
    size = model_size(skeleton(name, config, model_class), base_only)
    check_size(name, size, budget)
    check_weights_hold(name, size, files)
    return size


def readable_count(count: int) -> str:
    for unit, scale in (("billion", 10**9), ("million", 10**6)):
        if count >= scale:
            return f"{count / scale:,.1f} {unit}"
    return f"{count:,}"
