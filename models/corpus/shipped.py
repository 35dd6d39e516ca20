"""Where corpus analyses are kept: `<cache>/corpus/`, one folder each, the shipped corpus's
under a name taken from its bytes (so an edited corpus is analysed again). The Corpus page
(ui/corpus_cache.py) and `attention-explorer prepare` (models/prepare.py) both read it here."""

from __future__ import annotations

import hashlib
from pathlib import Path

from models.loading.conversion_cache import cache_root

SHIPPED_CORPUS = Path(__file__).resolve().parents[2] / "data" / "corpus.txt"
UPLOADS = "uploads"  # the uploaded files themselves, beside their analyses


def analyses_root() -> Path:
    return cache_root() / "corpus"


def content_name(data: bytes) -> str:
    """Sixteen hex digits of the bytes' SHA-256: the same content, the same folder."""
    return hashlib.sha256(data).hexdigest()[:16]


def shipped_folder() -> Path:
    """The folder of the shipped corpus's analysis with the default model."""
    return analyses_root() / f"default-{content_name(SHIPPED_CORPUS.read_bytes())}"
