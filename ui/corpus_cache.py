"""The Corpus page's analyses: the shipped corpus analysed with the default model on first open
(with a progress bar) and kept on disk under the app's cache folder, uploaded corpora (bounded
in bytes and passages), and folders written by the command line; and the layouts drawn from an
analysis, kept in the byte-bounded store.

An analysis is one folder of models.corpus.outputs under `<cache>/corpus/`; at most
CORPUS_KEPT_ANALYSES of them are kept (the least recently used go). One analysis runs at a time
on the server.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

import numpy as np
import streamlit as st

from models.corpus.job import is_finished, run_corpus
from models.corpus.layout import heads_layout, points_layout
from models.corpus.reading import CorpusInputError
from models.corpus import shipped
from models.corpus.shipped import UPLOADS, analyses_root, content_name
from models.corpus.result import CorpusResult
from models.errors import ModelLoadError
from models.limits import CORPUS_KEPT_ANALYSES, CORPUS_UPLOAD_BYTES, CORPUS_UPLOAD_PASSAGES, MIB
from models.loading.decoder import DEFAULT_DECODER
from models.loading.pretrained import DEFAULT_MODEL
from models.loading.source import ModelSource
from models.store import stores
from models.store.keys import result_key
from ui import cache
from ui.byte_caches import kept
from ui.text import plain

_ONE_AT_A_TIME = threading.Lock()


def _prune(keep: Path) -> None:
    """Delete the least recently used analyses beyond CORPUS_KEPT_ANALYSES (never `keep`)."""
    root = analyses_root()
    folders = sorted((path for path in root.iterdir() if path.is_dir() and path.name != UPLOADS),
                     key=lambda path: path.stat().st_mtime, reverse=True)
    for old in [path for path in folders if path != keep][CORPUS_KEPT_ANALYSES - 1:]:
        shutil.rmtree(old, ignore_errors=True)
        for upload in (root / UPLOADS).glob(f"{old.name}.*"):
            upload.unlink(missing_ok=True)


def _analysed(corpus: Path, folder: Path, message: str, most: int | None = None,
              name: str | None = None) -> CorpusResult:
    """The analysis of `corpus` (called `name`, by default its file's name) with the default
    model in `folder`, run now (with a progress bar) unless it is there; one at a time on the
    server."""
    if not is_finished(folder):
        with _ONE_AT_A_TIME:
            if not is_finished(folder):
                loaded = cache.loaded(ModelSource.default())
                bar = st.progress(0.0, text=f"{message}…")

                def progress(state) -> None:
                    bar.progress(min(state.done / max(state.total, 1), 1.0),
                                 text=f"{message}: {state.line()}")
                try:
                    run_corpus(corpus, folder, loaded=loaded, most=most, progress=progress,
                               name=name)
                finally:
                    bar.empty()
    folder.touch()  # used now: the last to be pruned
    _prune(folder)
    return CorpusResult.open(folder)


def upload_key(name: str, data: bytes) -> str:
    """What an upload's analysis is kept under: its name and content (the analysis names the
    file as it was uploaded, so the same bytes under another name are another analysis)."""
    return f"upload-{content_name(name.encode('utf-8') + b'/' + data)}"


def default_result() -> CorpusResult | None:
    """The shipped corpus analysed with the default model (computed on first open)."""
    return _shown(lambda: _analysed(shipped.SHIPPED_CORPUS, shipped.shipped_folder(),
                                    "Analysing the shipped corpus (once per server)"))


def upload_label() -> str:
    """What the upload box takes, with its bounds."""
    return ("Plain text (one passage per line, or separated by blank lines), CSV or JSONL with a "
            f"'text' column, or Parquet: at most {CORPUS_UPLOAD_BYTES // MIB} MB and "
            f"{CORPUS_UPLOAD_PASSAGES:,} passages")


def uploaded_result(name: str, data: bytes) -> CorpusResult | None:
    """An uploaded corpus's analysis, or None after saying why there is none."""
    if len(data) > CORPUS_UPLOAD_BYTES:
        st.error(f"This file is {len(data) / MIB:.1f} MB; the page takes corpora of at most "
                 f"{CORPUS_UPLOAD_BYTES // MIB} MB. Run a larger one with the command line "
                 "(attention-explorer corpus) and open its folder here.")
        return None
    key = upload_key(name, data)
    uploads = analyses_root() / UPLOADS
    uploads.mkdir(parents=True, exist_ok=True)
    # Saved under its key (any name a browser sends is safe on disk), read by its extension,
    # and named as uploaded in every sentence.
    corpus = uploads / f"{key}{Path(name).suffix.lower() or '.txt'}"
    corpus.write_bytes(data)
    return _shown(lambda: _analysed(corpus, analyses_root() / key, f"Analysing {name}",
                                    most=CORPUS_UPLOAD_PASSAGES, name=name))


def folder_result(folder: str) -> CorpusResult | None:
    """A folder written by `attention-explorer corpus`, or None after saying why not."""
    return _shown(lambda: CorpusResult.open(Path(folder.strip()).expanduser()))


def _shown(open_result) -> CorpusResult | None:
    try:
        return open_result()
    except (CorpusInputError, ModelLoadError, ValueError, OSError) as error:
        st.error(plain(str(error)))
        return None


def _stamp(result: CorpusResult) -> tuple:
    """What identifies an analysis's content: its folder and when its summary was written."""
    return str(result.folder), (result.folder / "corpus.json").stat().st_mtime_ns


def heads_plane(result: CorpusResult) -> np.ndarray:
    """(L*H, 2) the heads laid out by MDS, computed once per analysis."""
    return kept(stores.RESULTS, result_key("corpus-heads-plane", *_stamp(result)),
                lambda: heads_layout(result.distances()), "Laying out the heads…")


def points_plane(result: CorpusResult, layer: int, head: int, method: str) -> np.ndarray:
    """(2S, 2) one head's queries then keys in a plane, computed once per head and method."""
    def compute() -> np.ndarray:
        points = result.head_points(layer, head)
        return points_layout(points.queries, points.keys, method)

    return kept(stores.RESULTS, result_key("corpus-points-plane", *_stamp(result), layer, head,
                                           method), compute, f"Projecting with {method}…")


def maps_link(result: CorpusResult, text: str, pair: str | None, layer: int, head: int) -> str:
    """A link opening *Attention maps* on one passage, layer and head, with the analysis's
    model."""
    name = result.summary["model"]["name"]
    params = {"text": text}
    if pair:
        params["pair"] = pair
    if result.summary["model"]["causal"]:
        params["model"] = "decoder" if name == DEFAULT_DECODER else f"decoder:{name}"
    elif name != DEFAULT_MODEL:
        params["model"] = f"pretrained:{name}"
    params.update(layer=str(layer), head=str(head))
    return "./?" + urlencode(params)


def timestamp(result: CorpusResult) -> str:
    """When the analysis was written, for a caption."""
    written = (result.folder / "corpus.json").stat().st_mtime
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(written))
