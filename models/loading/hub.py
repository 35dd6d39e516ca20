"""The Hugging Face Hub, only when the person running the server asks for it.

Offline by default: models load from local folders, the embedded models and what the app's own
Hub folder already holds. `ATTENTION_EXPLORER_HUB=on` turns downloads on; `./start.sh` and the
app set `HF_HUB_OFFLINE=1` otherwise (`stay_offline_unless_allowed`), so no library reaches the
network behind the loaders' backs.

Downloads go to a folder of the app's own (`hub_folder()`: `hub` in the app's cache,
$ATTENTION_EXPLORER_CACHE or ~/.cache/attention-explorer), bounded on disk by
`limits.HUB_CACHE_BYTES`: before a model's files are downloaded their sizes are asked of the Hub
(a dry run), a model larger than the whole budget is refused, and the models used least
recently are deleted until the new one fits.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

from models.errors import ModelLoadError
from models.limits import HUB_CACHE_BYTES
from models.loading.conversion_cache import cache_root
from models.loading.loader_checks import readable_bytes

HUB_ENV = "ATTENTION_EXPLORER_HUB"
OFFLINE_ENV = "HF_HUB_OFFLINE"
ON = ("on", "1", "true", "yes")
HUB_FOLDER = "hub"
REPO_PREFIX = "models--"  # how huggingface_hub names a model's folder in a cache
# Downloads one at a time: making room and downloading must not interleave.
DOWNLOAD_LOCK = threading.Lock()


def hub_allowed() -> bool:
    """Whether this server may download models from the Hub (ATTENTION_EXPLORER_HUB=on)."""
    return os.environ.get(HUB_ENV, "").strip().lower() in ON


def stay_offline_unless_allowed() -> None:
    """Set HF_HUB_OFFLINE=1 for this process unless the Hub is turned on."""
    if not hub_allowed():
        os.environ[OFFLINE_ENV] = "1"


def hub_folder() -> Path:
    """The app's own Hugging Face cache folder (downloads and offline lookups both use it)."""
    return cache_root() / HUB_FOLDER


def repo_folder(name: str, folder: Path | None = None) -> Path:
    """Where huggingface_hub keeps the model `name` inside a cache folder."""
    return (folder or hub_folder()) / (REPO_PREFIX + name.replace("/", "--"))


def folder_bytes(folder: Path) -> int:
    """The bytes of every regular file under `folder` (links not followed: a cache's snapshots
    link to its blobs, which are counted once)."""
    total = 0
    for root, _, files in os.walk(folder):
        for file in files:
            path = Path(root) / file
            if not path.is_symlink():
                total += path.stat().st_size
    return total


def touch(name: str, folder: Path | None = None) -> None:
    """Mark a downloaded model as used now (least recently used models are deleted first)."""
    repo = repo_folder(name, folder)
    if repo.is_dir():
        now = time.time()
        os.utime(repo, (now, now))


def make_room(name: str, incoming: int, folder: Path | None = None,
              budget: int = HUB_CACHE_BYTES) -> tuple[str, ...]:
    """Delete the least recently used downloaded models until `incoming` more bytes fit in
    `budget`; returns the folders deleted. ModelLoadError when the model alone would not fit.
    The model being downloaded (`name`) is never deleted."""
    if incoming > budget:
        raise ModelLoadError(
            f"Could not load '{name}': its files take {readable_bytes(incoming)}, more than the "
            f"{readable_bytes(budget)} this server keeps for downloaded models."
        )
    folder = folder or hub_folder()
    mine = repo_folder(name, folder)
    others = sorted((repo for repo in folder.glob(REPO_PREFIX + "*")
                     if repo.is_dir() and repo != mine), key=lambda repo: repo.stat().st_mtime)
    sizes = {repo: folder_bytes(repo) for repo in others}
    used = sum(sizes.values()) + (folder_bytes(mine) if mine.is_dir() else 0)
    deleted = []
    for repo in others:
        if used + incoming <= budget:
            break
        shutil.rmtree(repo, ignore_errors=True)
        used -= sizes[repo]
        deleted.append(repo.name)
    return tuple(deleted)


def planned_bytes(plan) -> int:
    """What a dry run of snapshot_download would download (files already kept count nothing)."""
    return sum(item.file_size or 0 for item in plan if item.will_download)
