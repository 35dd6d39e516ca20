"""Export files on disk, downloaded straight from disk: no download is ever held in memory.

Why not `st.download_button`: whatever it is given (bytes, an open file, a callable), Streamlit
1.67 reads the whole file into its MemoryMediaFileStorage (`convert_data_to_bytes_and_infer_mime`
calls `.read()`; a path is read by `_read_file`), once per session that asks. Streamlit's static
file serving (`[server] enableStaticServing = true` in .streamlit/config.toml) answers
`app/static/<path>` with Starlette's FileResponse, which sends a file in 64 KiB chunks from disk,
looks the file up on each request (so files written after start are served) and refuses files
over 200 MB (MAX_APP_STATIC_FILE_SIZE). So an export is written once to `static/exports/`, chunk
by chunk (viz.export's writers), and offered as a link with the `download` attribute. Measured:
4 clients downloading a 199 MB export at once left the server's RSS where it was (533 MB).

The store is bounded: EXPORT_DISK_BYTES in all, the least recently offered file deleted first;
each file sits in a folder with a random 128-bit name (static files are served to anyone who
knows the address); the same export of the same content is written once and shared; and this
process's folder is removed when it exits (a folder left by a process that died is removed by
the next one).
"""

from __future__ import annotations

import hashlib
import io
import mimetypes
import os
import secrets
import shutil
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import quote

from models.limits import EXPORT_DISK_BYTES, MAX_EXPORT_BYTES, MIB
from ui.shutdown import on_shutdown

WRITE_BUFFER_BYTES = 1 * MIB
STATIC_DIR = Path(__file__).resolve().parents[1] / "static"  # next to app.py
EXPORTS_DIR = STATIC_DIR / "exports"
STATIC_URL = "app/static"  # relative to the page, so a server.baseUrlPath is kept
NAME_BYTES = 16  # random bytes in each file's folder name

# An NPZ is a zip archive: served as application/zip, the server's gzip layer leaves it alone
# instead of compressing deflated data again for every download (by default the static route
# sends a type it does not know as application/octet-stream, which is gzipped).
mimetypes.add_type("application/zip", ".npz")


class ExportTooLarge(Exception):
    """An export that would pass MAX_EXPORT_BYTES."""


@dataclass(frozen=True)
class ExportFile:
    """A written export: where it is and the address the browser downloads it from."""

    path: Path
    file_name: str
    size: int
    url: str


class _CappedFile(io.FileIO):
    """A file that refuses to grow past `limit` bytes."""

    def __init__(self, path: Path, limit: int):
        super().__init__(path, "wb")
        self._limit = limit

    def write(self, data) -> int:
        if self.tell() + memoryview(data).nbytes > self._limit:
            raise ExportTooLarge(f"the file would be larger than {self._limit / MIB:.0f} MB")
        return super().write(data)


class ExportStore:
    """Export files under `root`, at most `budget` bytes together, each written once per key."""

    def __init__(self, root: Path, url_prefix: str, budget: int = EXPORT_DISK_BYTES,
                 max_file: int = MAX_EXPORT_BYTES):
        self._root = root
        self._url_prefix = url_prefix.rstrip("/")
        self._budget = budget
        self._max_file = max_file
        self._files: OrderedDict[Hashable, ExportFile] = OrderedDict()  # least recent first
        self._writing: dict[Hashable, threading.Lock] = {}
        self._stored = 0  # bytes of the files in `_files`
        self._reserved = 0  # bytes set aside for files being written
        self._lock = threading.Lock()

    @property
    def stored_bytes(self) -> int:
        return self._stored

    def find(self, key: Hashable) -> ExportFile | None:
        """The file already written for `key` (it becomes the most recently offered)."""
        with self._lock:
            return self._touch(key)

    def prepare(self, key: Hashable, file_name: str, bound: int,
                write: Callable[[BinaryIO], None]) -> ExportFile:
        """The file for `key`, written by `write` into a new file unless it exists. `bound` is
        the most it can take (set aside while it is written, so the store stays in budget);
        raises ExportTooLarge, leaving nothing behind, for a file over the store's limit."""
        with self._lock:
            found = self._touch(key)
            if found is not None:
                return found
            gate = self._writing.setdefault(key, threading.Lock())
        with gate:  # one writer per key; another session asking waits and shares the file
            with self._lock:
                found = self._touch(key)
                if found is not None:
                    return found
                reserved = min(bound, self._max_file)
                self._reserved += reserved
                self._evict()
            try:
                written = self._write(file_name, write)
            finally:
                with self._lock:
                    self._reserved -= reserved
                    self._writing.pop(key, None)
            with self._lock:
                found = self._touch(key)
                if found is not None:  # a writer that started after a failed one finished first
                    shutil.rmtree(written.path.parent, ignore_errors=True)
                    return found
                self._files[key] = written
                self._stored += written.size
                self._evict(keep=key)
            return written

    def remove_all(self) -> None:
        """Delete every file and the store's folder."""
        with self._lock:
            self._files.clear()
            self._stored = 0
            shutil.rmtree(self._root, ignore_errors=True)

    def _touch(self, key: Hashable) -> ExportFile | None:
        found = self._files.get(key)
        if found is not None:
            self._files.move_to_end(key)
        return found

    def _evict(self, keep: Hashable | None = None) -> None:
        """Delete the least recently offered files, never `keep`, until the written and the
        set-aside bytes fit the budget."""
        while self._stored + self._reserved > self._budget:
            oldest = next((key for key in self._files if key != keep), None)
            if oldest is None:
                return
            gone = self._files.pop(oldest)
            self._stored -= gone.size
            shutil.rmtree(gone.path.parent, ignore_errors=True)

    def _write(self, file_name: str, write: Callable[[BinaryIO], None]) -> ExportFile:
        folder = self._root / secrets.token_urlsafe(NAME_BYTES)
        folder.mkdir(parents=True)
        path = folder / file_name
        try:
            with io.BufferedWriter(_CappedFile(path, self._max_file),
                                   WRITE_BUFFER_BYTES) as handle:
                write(handle)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        url = "/".join((self._url_prefix, quote(folder.name), quote(file_name)))
        return ExportFile(path, file_name, path.stat().st_size, url)


class Fingerprints:
    """A digest of each live object's content, computed once per object (the caches hand every
    session the same record or array, so a rerun finds its digest without reading it again)."""

    def __init__(self):
        self._digests: dict[int, tuple[weakref.ref, str]] = {}
        self._lock = threading.Lock()

    def known(self, subject: object) -> str | None:
        with self._lock:
            entry = self._digests.get(id(subject))
        return entry[1] if entry is not None and entry[0]() is subject else None

    def of(self, subject: object, content: Callable[[], Iterable]) -> str:
        """The digest of `content()` (buffers or bytes), kept while `subject` lives."""
        digest = self.known(subject)
        if digest is not None:
            return digest
        hasher = hashlib.sha256()
        for part in content():
            hasher.update(part)
        digest = hasher.hexdigest()
        number = id(subject)

        def forget(reference: weakref.ref) -> None:
            with self._lock:
                if self._digests.get(number, (None,))[0] is reference:
                    del self._digests[number]

        with self._lock:
            self._digests[number] = (weakref.ref(subject, forget), digest)
        return digest


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale_folders(exports: Path, own: Path) -> None:
    """Remove the folders of processes that died without cleaning up (a folder is named
    "<pid>-<random>"; one with this process's pid but not its name is a dead predecessor's)."""
    if not exports.is_dir():
        return
    for folder in exports.iterdir():
        pid, _, _ = folder.name.partition("-")
        if folder == own or not pid.isdigit():
            continue
        if int(pid) == os.getpid() or not _pid_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


_STORE: ExportStore | None = None
_STORE_LOCK = threading.Lock()
FINGERPRINTS = Fingerprints()


def store() -> ExportStore:
    """This process's export store, under static/exports/, removed when the process exits."""
    global _STORE
    with _STORE_LOCK:
        if _STORE is None:
            name = f"{os.getpid()}-{secrets.token_urlsafe(NAME_BYTES)}"
            remove_stale_folders(EXPORTS_DIR, EXPORTS_DIR / name)
            _STORE = ExportStore(EXPORTS_DIR / name, f"{STATIC_URL}/exports/{name}")
            on_shutdown(_STORE.remove_all)
        return _STORE
