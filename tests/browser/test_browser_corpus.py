"""The Corpus page in Chromium: a small uploaded corpus is analysed on the server with the
embedded encoder, and the layer x head map it draws holds the numbers the in-process job writes
to heads.parquet for the same file; a file without a text column gets one sentence. Both name
the file as it was uploaded, never the copy the server keeps. Opened in presenter mode on a
projector's 1280 x 720 screen, the page's map of the shipped corpus and the choice of its measure
are wholly on the first screen, beside its introduction."""

from __future__ import annotations

import base64
import shutil

import numpy as np
import pandas as pd

from models.corpus.job import run_corpus
from tests.browser.test_browser import SCREENSHOTS, assert_clean, page  # noqa: F401 (fixture)
from tests.browser_support import visit, wait_idle
from tests.corpus.support import PASSAGES
from ui import corpus_cache

ATOL = 1e-5
COUNT = 5  # a few short passages: the job takes seconds
UPLOAD = "corpus_upload"
MEASURE = "entropy"  # the page's first measure
PROJECTOR = {"width": 1280, "height": 720}
NAME = "my *own* passages.txt"  # shown as typed: no emphasis, not the server's copy's name


def upload(page, name: str, data: bytes) -> None:
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(
        files=[{"name": name, "mimeType": "text/plain", "buffer": data}])


def plain(value) -> np.ndarray:
    """A figure array as the browser holds it: nested lists, or Plotly's packed typed array
    ({dtype, bdata, shape}) where plotly.js leaves it packed."""
    if isinstance(value, dict) and "bdata" in value:
        shape = [int(size) for size in str(value.get("shape", "-1")).split(",")]
        return np.frombuffer(base64.b64decode(value["bdata"]),
                             dtype=np.dtype(value["dtype"])).reshape(shape).astype(float)
    if isinstance(value, dict):  # a typed array handed over as {index: value}
        return np.array([value[str(index)] for index in range(len(value))], dtype=float)
    return np.array([plain(row) if isinstance(row, dict) else row for row in value], dtype=float)


def drawn_map(page) -> tuple[np.ndarray, np.ndarray]:
    """The layer x head map's z and hover spread (L, H), read from the Plotly figure in the
    page."""
    trace = page.evaluate(
        "() => { const t = document.querySelectorAll('.js-plotly-plot')[0].data[0];"
        " const unpack = v => (ArrayBuffer.isView(v) ? Array.from(v) :"
        " Array.isArray(v) ? v.map(unpack) : v);"
        " return {z: unpack(t.z), customdata: unpack(t.customdata)}; }")
    return plain(trace["z"]), plain(trace["customdata"])[..., 0]


def test_an_uploaded_corpus_is_analysed_and_drawn_with_the_job_numbers(app_url, page, tmp_path,
                                                                        encoder_runner):
    data = ("\n".join(PASSAGES[:COUNT]) + "\n").encode("utf-8")
    # The page keeps analyses by content: start from none, so this run computes one.
    shutil.rmtree(corpus_cache.analyses_root() / corpus_cache.upload_key(NAME, data),
                  ignore_errors=True)
    corpus = tmp_path / "passages.txt"
    corpus.write_bytes(data)
    run_corpus(corpus, tmp_path / "out", loaded=encoder_runner)
    heads = pd.read_parquet(tmp_path / "out" / "heads.parquet")

    viewport = page.viewport_size
    page.set_viewport_size(PROJECTOR)
    visit(page, app_url, "corpus?present=true", "Corpus: every head over many passages")
    chart = page.locator(".st-key-corpus_map .js-plotly-plot")
    chart.locator(".main-svg").first.wait_for(timeout=180_000)
    wait_idle(page)
    box = chart.bounding_box()  # before any scrolling, in presenter mode's larger text
    assert box is not None and box["y"] >= 0 and box["height"] > 300, box
    assert box["y"] + box["height"] <= PROJECTOR["height"], box
    choice = page.get_by_label("Measure", exact=True)  # the map's own choice, beside it
    choice.wait_for()
    box = choice.bounding_box()
    assert box is not None and box["y"] >= 0, box
    assert box["y"] + box["height"] <= PROJECTOR["height"], box
    page.set_viewport_size(viewport)
    page.get_by_text("Upload a corpus", exact=True).click()
    wait_idle(page)
    upload(page, NAME, data)
    caption = page.get_by_text(f"{COUNT} passages", exact=False).first
    caption.wait_for(timeout=180_000)
    wait_idle(page, timeout_ms=180_000)
    assert caption.inner_text().startswith(f"{NAME}: {COUNT} passages"), \
        caption.inner_text()
    page.locator(".js-plotly-plot").nth(2).wait_for(timeout=60_000)
    means, spreads = drawn_map(page)
    expected = heads.pivot(index="layer", columns="head", values=f"{MEASURE}_mean")
    spread = heads.pivot(index="layer", columns="head", values=f"{MEASURE}_std")
    np.testing.assert_allclose(means, expected.to_numpy(float), rtol=0, atol=ATOL)
    np.testing.assert_allclose(spreads, spread.to_numpy(float), rtol=0, atol=ATOL)
    page.screenshot(path=str(SCREENSHOTS / "corpus-upload.png"))
    assert_clean(page)

    upload(page, "people.csv", b"name,age\nAnn,3\nBo,4\n")
    alert = page.locator('[data-testid="stAlert"]', has_text="has no 'text' column")
    alert.first.wait_for(timeout=60_000)
    wait_idle(page)
    message = alert.first.inner_text().strip()
    assert message.endswith(".") and message.count(". ") == 0, message  # one sentence
    assert message.startswith("people.csv has no 'text' column"), message
    assert "Traceback" not in page.content() and "upload-" not in page.inner_text("body")
    assert_clean(page)
