"""Checks a model passes before any loader reads it: each failure is one sentence, and nothing
is built, allocated or unpickled for a model that fails.

- the name: not absurdly long, and a local folder only where the server allows local folders
  (the ATTENTION_EXPLORER_LOCAL_MODELS setting);
- config.json: valid JSON, an object, whole numbers where sizes go, no number too large for any
  model wherever it is;
- the size: counted from the model the config builds (models/loading/size_checks.py), refused
  above `limits.MODEL_BYTES`;
- the weight files, before and after loading: models/loading/weight_checks.py.

`reason` and the short forms of names and sizes word every check's message; `reading_boundary`
turns whatever else goes wrong while a model folder is read (a file nested too deeply to parse,
an undecodable or unreadable file) into one, and `loading_boundary` does the same while a model
is built.
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
from models.limits import GIB, MIB, MODEL_NAME_CHARS, SAFETENSORS_HEADER_BYTES

LOCAL_MODELS_ENV = "ATTENTION_EXPLORER_LOCAL_MODELS"
ANY_FOLDER = "any"
NO_FOLDER = "off"

CONFIG_FILE = "config.json"

LARGEST_SIZE = 2**31  # no config size (width, layers, vocabulary, positions) is this large
SHOWN_DIGITS = 40  # a number in a message is written out up to this many digits

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
    except RecursionError as error:
        raise ModelLoadError(
            f"Could not load '{name}': its config.json is nested too deeply to be read."
        ) from error
    except ValueError as error:  # Python reads no whole number of more than 4,300 digits
        raise ModelLoadError(
            f"Could not load '{name}': its config.json holds a number too long to be read."
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
                f"Could not load '{name}': config.json's {key} is {_count(value)}, which no model "
                "can have."
            )
    for key, value in _whole_numbers(config):
        if abs(value) >= LARGEST_SIZE:
            raise ModelLoadError(
                f"Could not load '{name}': config.json's {short_name(key)} is {_count(value)}, "
                "which no model can have."
            )


def _whole_numbers(config: dict) -> Iterator[tuple[str, int]]:
    """Every whole number in a config, nested settings (a `text_config`, lists) included, with
    the key it is under; walked without recursion, however deep."""
    waiting = [(str(key), value) for key, value in config.items()]
    while waiting:
        key, value = waiting.pop()
        if isinstance(value, dict):
            waiting.extend((str(inner), item) for inner, item in value.items())
        elif isinstance(value, list):
            waiting.extend((key, item) for item in value)
        elif isinstance(value, int) and not isinstance(value, bool):
            yield key, value


def _count(value: int) -> str:
    """A whole number as text, unless it is too long to show."""
    if abs(value) < 10**SHOWN_DIGITS:
        return f"{value:,}"
    return f"a number of more than {SHOWN_DIGITS} digits"


def _show(value) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "…"


def readable_bytes(count: int) -> str:
    if count >= GIB:
        return f"{count / GIB:,.1f} GB"
    return f"{math.ceil(count / MIB):,} MB" if count >= MIB else f"{count:,} bytes"


def unexpected(error: BaseException, name: str, source: str | Path | None = None) -> ModelLoadError:
    """Any error met while reading or building a model, as the loader's one sentence."""
    if isinstance(error, RecursionError):
        why = "one of its files is nested too deeply to be read"
    elif isinstance(error, MemoryError):
        why = "reading it needs more memory than this server has"
    elif isinstance(error, UnicodeDecodeError):
        why = "one of its text files is not UTF-8 text"
    elif isinstance(error, PermissionError):
        why = "one of its files may not be read"
    elif isinstance(error, OSError):
        why = f"one of its files cannot be read ({reason(error, name, source)[:-1]})"
    else:
        return ModelLoadError(f"Could not load '{name}': {reason(error, name, source)}")
    return ModelLoadError(f"Could not load '{name}': {why}.")


@contextlib.contextmanager
def reading_boundary(name: str, source: str | Path | None = None) -> Iterator[None]:
    """Whatever goes wrong while a model folder is read (a file nested too deeply, undecodable
    or unreadable, a library's own error) becomes one ModelLoadError naming the model."""
    try:
        yield
    except ModelLoadError:
        raise
    except Exception as error:
        raise unexpected(error, name, source) from error


@contextlib.contextmanager
def loading_boundary(name: str, source: str | Path | None = None) -> Iterator[None]:
    """Whatever a library raises while building a checked model becomes one ModelLoadError.

    The checks catch what they can name; this is the last line, so that no library error
    (a TypeError deep in a model's constructor, a MemoryError) reaches the page as a stack trace.
    Models are built one at a time (BUILD_LOCK).
    """
    with reading_boundary(name, source), BUILD_LOCK:
        yield
