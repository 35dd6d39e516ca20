"""Checks a model passes before any loader reads it: each failure is one sentence, and nothing
is built, allocated or unpickled for a model that fails.

- the name: not absurdly long, and a local folder only where the server allows local folders
  (the ATTENTION_EXPLORER_LOCAL_MODELS setting);
- config.json: valid JSON, an object, whole numbers where sizes go;
- the size: parameters estimated from config.json, refused above `limits.MODEL_BYTES`;
- the weight files, before and after loading: models/loading/weight_checks.py.

`reason` and the short forms of names and sizes word every check's message, and
`loading_boundary` turns whatever else a library raises while building a model into one.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from models.errors import ModelLoadError, first_sentence
from models.limits import GIB, MIB, MODEL_BYTES, MODEL_NAME_CHARS, SAFETENSORS_HEADER_BYTES

LOCAL_MODELS_ENV = "ATTENTION_EXPLORER_LOCAL_MODELS"
ANY_FOLDER = "any"
NO_FOLDER = "off"

CONFIG_FILE = "config.json"

FLOAT32_BYTES = 4
LARGEST_SIZE = 2**31  # no config size (width, layers, vocabulary, positions) is this large

# config.json keys that hold a size: each must be a whole number >= 1 when present.
WIDTH_KEYS = ("hidden_size", "n_embd", "d_model", "dim")
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
HEAD_KEYS = ("num_attention_heads", "n_head", "num_heads", "n_heads")
FEED_FORWARD_KEYS = ("intermediate_size", "n_inner", "ffn_dim", "hidden_dim", "d_ff")
POSITION_KEYS = ("max_position_embeddings", "n_positions", "n_ctx")
SIZE_KEYS = (WIDTH_KEYS + LAYER_KEYS + HEAD_KEYS + FEED_FORWARD_KEYS + POSITION_KEYS
             + ("vocab_size", "num_key_value_heads", "head_dim", "embedding_size",
                "num_local_experts", "num_experts"))
# Sizes that may be 0 (BERT's token types: DistilBERT-like configs set none).
COUNT_KEYS = ("type_vocab_size",)
# transformers' from_pretrained swaps process-wide state (torch's init functions, default
# device and dtype) while it builds a model, so two loads in parallel threads can leave a model
# half-initialised (a tied output layer reported missing) or break later loads: one at a time.
BUILD_LOCK = threading.RLock()


# The name and the folder policy.

@dataclass(frozen=True)
class FolderPolicy:
    """Which local folders a user may load: any, none, or those under `roots`."""

    mode: str
    roots: tuple[Path, ...] = ()

    @property
    def restricted(self) -> bool:
        return self.mode != ANY_FOLDER


def folder_policy() -> FolderPolicy:
    """Read ATTENTION_EXPLORER_LOCAL_MODELS: `any` (the default), `off`, or folders joined by ':'."""
    setting = os.environ.get(LOCAL_MODELS_ENV, "").strip()
    if setting.lower() in ("", ANY_FOLDER):
        return FolderPolicy(ANY_FOLDER)
    if setting.lower() == NO_FOLDER:
        return FolderPolicy(NO_FOLDER)
    roots = tuple(Path(os.path.realpath(os.path.expanduser(part.strip())))
                  for part in setting.split(":") if part.strip())
    return FolderPolicy("list", roots) if roots else FolderPolicy(NO_FOLDER)


def check_name_length(name: str) -> None:
    if len(name) > MODEL_NAME_CHARS:
        raise ModelLoadError(
            f"Could not load the model: its name is {len(name):,} characters long, and names "
            f"and folders longer than {MODEL_NAME_CHARS:,} characters are not accepted."
        )
    if any(len(part.encode()) > 255 for part in name.split("/")):
        raise ModelLoadError(
            f"Could not load '{short_name(name)}': one part of the name is longer than any file or "
            "folder name can be (255 bytes)."
        )


def real_folder(name: str) -> Path:
    """The absolute path a typed folder name refers to, symbolic links resolved."""
    expanded = os.path.expanduser(name)
    try:
        return Path(os.path.realpath(expanded))
    except (OSError, ValueError):
        return Path(os.path.normpath(os.path.abspath(expanded)))


def check_folder_allowed(name: str, policy: FolderPolicy | None = None) -> None:
    """Refuse a typed folder the server does not allow, before looking at the disk.

    The message repeats only what the user typed: whether such a folder exists is not revealed.
    """
    policy = policy or folder_policy()
    if policy.mode == ANY_FOLDER:
        return
    if policy.mode == NO_FOLDER:
        raise ModelLoadError(
            f"Could not load '{short_name(name)}': this server does not load models from its own "
            "folders, only Hugging Face model ids."
        )
    folder = real_folder(name)
    if not any(folder == root or root in folder.parents for root in policy.roots):
        raise ModelLoadError(
            f"Could not load '{short_name(name)}': it is not in a folder this server allows models "
            "to be loaded from."
        )


def short_name(name: str) -> str:
    return name if len(name) <= 120 else name[:100] + "…"


def reason(error: BaseException, name: str, source: str | Path | None = None,
           policy: FolderPolicy | None = None) -> str:
    """A library's error as one sentence that names the model as the user typed it.

    The resolved folder is replaced by the user's name; when local folders are restricted,
    any other absolute path is hidden too.
    """
    text = first_sentence(error)
    if source is not None:
        for spelled in sorted({str(source), str(real_folder(str(source)))}, key=len, reverse=True):
            if len(spelled) > 1:
                text = text.replace(spelled, name)
    if (policy or folder_policy()).restricted:
        text = re.sub(r"(?<![\w.])/[^\s'\"(),]+", "(a server path)", text)
    return text


# config.json.

def read_config(name: str, folder: Path) -> dict:
    """config.json as a dict, with what is wrong with it named in one sentence."""
    path = folder / CONFIG_FILE
    try:
        size = path.stat().st_size
        if size > SAFETENSORS_HEADER_BYTES:
            raise ModelLoadError(
                f"Could not load '{name}': its config.json is {size // MIB} MB, far more than "
                "a model's settings take."
            )
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ModelLoadError(f"Could not load '{name}': its config.json is not text.") from error
    except OSError as error:
        raise ModelLoadError(
            f"Could not load '{name}': its config.json cannot be read ({reason(error, name, folder)[:-1]})."
        ) from error
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ModelLoadError(
            f"Could not load '{name}': its config.json is not valid JSON ({error.msg} at line "
            f"{error.lineno}, column {error.colno})."
        ) from error
    if not isinstance(config, dict):
        raise ModelLoadError(
            f"Could not load '{name}': its config.json holds a JSON {_json_kind(config)}, not "
            "an object of settings."
        )
    check_config_values(name, config)
    return config


def _json_kind(value) -> str:
    kinds = {list: "list", str: "string", bool: "true/false value", type(None): "null"}
    return kinds.get(type(value), "number")


def check_config_values(name: str, config: dict) -> None:
    """Every size a config gives is a whole number in range, and the model type is a string."""
    model_type = config.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise ModelLoadError(
            f"Could not load '{name}': config.json's model_type must be a name, not "
            f"{_show(model_type)}."
        )
    for key in SIZE_KEYS + COUNT_KEYS:
        if key not in config or config[key] is None:
            continue
        value = config[key]
        smallest = 0 if key in COUNT_KEYS else 1
        if isinstance(value, bool) or not isinstance(value, int):
            raise ModelLoadError(
                f"Could not load '{name}': config.json's {key} must be a whole number, not "
                f"{_show(value)}."
            )
        if not smallest <= value < LARGEST_SIZE:
            raise ModelLoadError(
                f"Could not load '{name}': config.json's {key} is {value:,}, which no model can "
                "have."
            )


def _show(value) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "…"


def _first(config: dict, keys: tuple[str, ...], default: int = 0) -> int:
    for key in keys:
        if isinstance(config.get(key), int) and not isinstance(config.get(key), bool):
            return config[key]
    return default


def estimate_parameters(config: dict) -> int:
    """An upper estimate of a transformer's parameter count from its config.json alone.

    Embeddings (vocabulary × width, plus an output layer when it is not tied, positions × width,
    token types × width) and per layer the attention (4 × width²) and a gated feed-forward
    (3 × width × feed-forward width, times the experts of a mixture): a little more than the
    12 × width² of a BERT or GPT-2 layer, so a model is never estimated below what it allocates.
    """
    width = _first(config, WIDTH_KEYS)
    layers = _first(config, LAYER_KEYS)
    heads = _first(config, HEAD_KEYS, 1)
    head_width = _first(config, ("head_dim",), width // max(heads, 1))
    attention_width = max(width, heads * head_width)
    feed_forward = _first(config, FEED_FORWARD_KEYS, 4 * width)
    experts = max(_first(config, ("num_local_experts", "num_experts"), 1), 1)
    vocabulary = _first(config, ("vocab_size",))
    embedding = _first(config, ("embedding_size",), width)
    positions = _first(config, POSITION_KEYS)
    token_types = _first(config, COUNT_KEYS)
    embeddings = vocabulary * embedding + (positions + token_types) * width
    if config.get("tie_word_embeddings") is False:
        embeddings += vocabulary * width
    per_layer = 4 * width * attention_width + 3 * width * feed_forward * experts
    return embeddings + layers * per_layer


def check_model_size(name: str, config: dict, budget: int = MODEL_BYTES) -> int:
    """Refuse a model whose float32 parameters would take more than `budget`; return the bytes."""
    needed = estimate_parameters(config) * FLOAT32_BYTES
    if needed > budget:
        raise ModelLoadError(
            f"Could not load '{name}': its config.json describes about "
            f"{_readable_count(needed // FLOAT32_BYTES)} parameters ({readable_bytes(needed)} "
            f"in memory), more than this server's limit of {readable_bytes(budget)} per model."
        )
    return needed


def _readable_count(count: int) -> str:
    for unit, size in (("billion", 10**9), ("million", 10**6)):
        if count >= size:
            return f"{count / size:,.1f} {unit}"
    return f"{count:,}"


def readable_bytes(count: int) -> str:
    if count >= GIB:
        return f"{count / GIB:,.1f} GB"
    return f"{math.ceil(count / MIB):,} MB" if count >= MIB else f"{count:,} bytes"


@contextlib.contextmanager
def loading_boundary(name: str, source: str | Path | None = None) -> Iterator[None]:
    """Whatever a library raises while building a checked model becomes one ModelLoadError.

    The checks catch what they can name; this is the last line, so that no library error
    (a TypeError deep in a model's constructor, a MemoryError) reaches the page as a stack trace.
    Models are built one at a time (BUILD_LOCK).
    """
    try:
        with BUILD_LOCK:
            yield
    except ModelLoadError:
        raise
    except Exception as error:
        raise ModelLoadError(f"Could not load '{name}': {reason(error, name, source)}") from error
