"""The bookkeeping of the converted SmolLM2's cache folder (models/loading/conversion.py converts it).

Where the cache lives ($ATTENTION_EXPLORER_CACHE or ~/.cache/attention-explorer), whether a copy
is complete (the manifest, written last, holds each file's size and SHA-256; a file's digest is
remembered per process while the file is unchanged), and the lock that lets one session convert
while the others wait: a threading lock, then `fcntl.flock` on a file beside the cache folder.
The converter publishes its progress in a file beside the folder too, and waiting sessions
report it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from models.errors import ModelLoadError, first_sentence
from models.limits import MIB

CACHE_ENV = "ATTENTION_EXPLORER_CACHE"
DEFAULT_CACHE_ROOT = Path("~/.cache/attention-explorer")
CACHE_FORMAT = 2  # bump when the converted folder's layout changes (2: SHA-256 per file)
MANIFEST = "converted.json"  # written last: its presence, sizes and checksums mark a complete cache
CACHE_FILES = ("config.json", "model.safetensors", "tokenizer.json")
HASH_CHUNK_BYTES = 8 * MIB
WAIT_POLL_S = 0.2  # how often a waiting session looks for the converter's progress
WAITING_MESSAGE = "Another session is preparing SmolLM2; waiting for it…"

Progress = Callable[[float, str], None]


def no_progress(fraction: float, message: str) -> None:
    """The default progress callback: report nothing."""


def cache_root(cache_dir: Path | None = None) -> Path:
    return Path(cache_dir or os.environ.get(CACHE_ENV) or DEFAULT_CACHE_ROOT).expanduser()


def manifest_stamp(folder: Path) -> tuple[int, int] | None:
    """Which manifest is in place (inode, modification time): a rebuild gives a new one."""
    try:
        status = (folder / MANIFEST).stat()
    except OSError:
        return None
    return status.st_ino, status.st_mtime_ns


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
def conversion_lock(folder: Path, report: Progress) -> Iterator[None]:
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


def publishing(folder: Path, report: Progress) -> Progress:
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
