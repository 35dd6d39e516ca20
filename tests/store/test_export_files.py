"""Exports written to disk chunk by chunk, kept in a bounded store and downloaded from
Streamlit's static file serving (no download is held in server memory)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import threading
import time
import tomllib
import tracemalloc
import urllib.request
import zipfile
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from models.hooks.record import AttentionRecord
from tests.app_support import GUARD_MESSAGE, ROOT, assert_no_failure, run_page
from tests.reference import reference_attentions
from ui import export_files
from ui.export_files import ExportStore, ExportTooLarge, Fingerprints, remove_stale_folders
from viz import export
from viz.export import load_npz

LINK = re.compile(r'<a href="([^"]+)" download="([^"]+)"')
SCREENSHOTS = ROOT / "artifacts" / "screenshots"


def softmax_record(tokens=6, layers=2, heads=3, keys=None, seed=0, key_tokens=()):
    rng = np.random.default_rng(seed)
    scores = rng.standard_normal((layers, heads, tokens, keys or tokens)).astype(np.float32) * 3
    weights = np.exp(scores - scores.max(-1, keepdims=True))  # (L, H, Q, K)
    return AttentionRecord(tokens=tuple(f't,"{i}é' for i in range(tokens)),  # CSV must quote
                           weights=weights / weights.sum(-1, keepdims=True), source="synthetic",
                           key_tokens=key_tokens)


def members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def savez(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


# --- the formats: today's bytes, written piece by piece ----------------------------------------

@pytest.mark.parametrize("record", [
    softmax_record(),
    softmax_record(tokens=4, keys=7, key_tokens=tuple(f"k{i}" for i in range(7))),
    softmax_record(tokens=300, layers=1, heads=2),  # several blocks of rows per head
], ids=["square", "cross-attention", "many-rows"])
def test_streamed_exports_hold_the_same_bytes_as_the_one_shot_ones(record):
    layer, head = record.num_layers - 1, 1
    assert export.head_csv(record, layer, head) == export.head_frame(record, layer, head).to_csv(
        float_format="%.6g").encode("utf-8")
    header = export._metadata(record) | {"layer": layer, "decimals": export.JSON_DECIMALS}
    heads = [json.dumps(np.round(record.layer(layer)[h].astype(np.float64), 4).tolist())
             for h in range(record.num_heads)]
    one_shot = json.dumps(header, ensure_ascii=False)[:-1] + ', "weights": [' + ", ".join(
        heads) + "]}"
    assert export.layer_json(record, layer) == one_shot.encode("utf-8")
    for half in (False, True):
        weights = record.weights.astype(np.float16) if half else record.weights
        metadata = export._metadata(record) | {"dtype": str(weights.dtype)}
        expected = savez(weights=weights, tokens=np.array(record.tokens, dtype=np.str_),
                         metadata=np.array(json.dumps(metadata, ensure_ascii=False)))
        assert members(export.record_npz(record, half)) == members(expected)
    assert len(export.head_csv(record, layer, head)) <= export.head_csv_bound(record)
    assert len(export.layer_json(record, layer)) <= export.layer_json_bound(record, layer)
    assert len(export.record_npz(record)) <= export.record_npz_bound(record)


def test_a_long_inputs_npz_files_hold_what_savez_wrote():
    weights = np.random.default_rng(1).random((50, 50)).astype(np.float32)
    tokens = tuple(f"w{i}" for i in range(50))
    metadata = {"format_version": export.FORMAT_VERSION, "source": "SmolLM2", "layer": 3,
                "head": 4, "maps": "exact", "dtype": "float32", "shape": [50, 50]}
    assert members(export.head_npz(weights, tokens, "SmolLM2", 3, 4)) == members(savez(
        weights=weights, tokens=np.array(tokens, dtype=np.str_),
        metadata=np.array(json.dumps(metadata))))
    assert len(export.head_npz(weights, tokens, "SmolLM2", 3, 4)) <= export.array_npz_bound(
        weights, tokens, "SmolLM2")


def test_writing_a_large_export_holds_a_few_rows_not_the_file(tmp_path):
    """512 tokens, 2 layers x 12 heads: the JSON layer (~20 MB) and the NPZ (~24 MB, float16
    ~10 MB) are written holding a block of rows at a time (~2 MB of Python floats and text for
    JSON, ~0.5 MB for NPZ); the old exports, built as bytes, peaked at two to three times the
    file."""
    record = softmax_record(tokens=512, layers=2, heads=12)
    for name, write in [("layer.json", lambda out: export.write_layer_json(out, record, 1)),
                        ("all.npz", lambda out: export.write_record_npz(out, record)),
                        ("half.npz", lambda out: export.write_record_npz(out, record, True))]:
        path = tmp_path / name
        tracemalloc.start()
        try:
            with open(path, "wb") as out:
                write(out)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        size = path.stat().st_size
        assert size > 10 * 2**20
        assert peak < 3 * 2**20 and peak < size / 6, (name, peak, size)
    restored = load_npz((tmp_path / "all.npz").read_bytes())
    np.testing.assert_array_equal(restored.weights, record.weights)
    assert restored.tokens == record.tokens
    payload = json.loads((tmp_path / "layer.json").read_text(encoding="utf-8"))
    np.testing.assert_allclose(payload["weights"], record.layer(1), atol=0.5e-4 + 1e-9)
    assert (tmp_path / "layer.json").stat().st_size <= export.layer_json_bound(record, 1)
    assert (tmp_path / "all.npz").stat().st_size <= export.record_npz_bound(record)


# --- the store ---------------------------------------------------------------------------------

def writer(payload: bytes, calls: list | None = None):
    def write(out):
        if calls is not None:
            calls.append(payload)
        out.write(payload)
    return write


def test_the_same_export_is_written_once_under_a_random_name(tmp_path):
    files = ExportStore(tmp_path / "store", "app/static/exports/p")
    calls = []
    first = files.prepare(("digest", "csv"), "model_L0H0.csv", 10, writer(b"a,b\n", calls))
    again = files.prepare(("digest", "csv"), "model_L0H0.csv", 10, writer(b"a,b\n", calls))
    other = files.prepare(("other", "csv"), "model_L0H0.csv", 10, writer(b"c,d\n", calls))
    assert calls == [b"a,b\n", b"c,d\n"] and again == first
    assert files.find(("digest", "csv")) == first and files.find(("nothing",)) is None
    assert first.path.read_bytes() == b"a,b\n" and first.size == 4
    folder = first.path.parent
    assert folder.parent == tmp_path / "store" and len(folder.name) >= 22  # 128 random bits
    assert other.path.parent != folder and other.path.name == first.path.name
    assert first.url == f"app/static/exports/p/{folder.name}/model_L0H0.csv"
    files.remove_all()
    assert not (tmp_path / "store").exists()


def test_sessions_asking_for_one_export_at_once_share_one_write(tmp_path):
    files = ExportStore(tmp_path, "u")
    calls = []

    def slow(out):
        calls.append(1)
        time.sleep(0.2)
        out.write(b"x" * 100)

    results = []
    threads = [threading.Thread(target=lambda: results.append(
        files.prepare("key", "f.npz", 100, slow))) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [1] and len(set(results)) == 1 and files.stored_bytes == 100


def test_the_store_keeps_its_budget_deleting_the_least_recently_offered(tmp_path):
    files = ExportStore(tmp_path, "u", budget=100, max_file=60)
    a = files.prepare("a", "a.csv", 40, writer(b"a" * 40))
    b = files.prepare("b", "b.csv", 40, writer(b"b" * 40))
    assert files.find("a") == a  # offered again: now b is the least recent
    c = files.prepare("c", "c.csv", 40, writer(b"c" * 40))
    assert not b.path.exists() and files.find("b") is None
    assert a.path.exists() and c.path.exists() and files.stored_bytes == 80

    seen = {}

    def check_room(out):  # room for the file is made before it is written
        seen["a"], seen["c"] = a.path.exists(), c.path.exists()
        out.write(b"d" * 50)

    files.prepare("d", "d.csv", 60, check_room)
    assert seen == {"a": False, "c": True} and files.stored_bytes == 90 <= 100
    assert sorted(p.name for p in tmp_path.glob("*/*")) == ["c.csv", "d.csv"]


@pytest.mark.parametrize("failure", ["too large", "error"])
def test_a_failed_export_leaves_nothing_behind(tmp_path, failure):
    files = ExportStore(tmp_path, "u", budget=1000, max_file=100)

    def write(out):
        out.write(b"x" * 60)
        if failure == "error":
            raise ValueError("the model went away")
        out.write(b"x" * 60)

    with pytest.raises(ExportTooLarge if failure == "too large" else ValueError):
        files.prepare("key", "f.json", 120, write)
    assert list(tmp_path.iterdir()) == [] and files.stored_bytes == 0
    assert files.prepare("key", "f.json", 10, writer(b"ok")).path.read_bytes() == b"ok"


def test_folders_left_by_dead_processes_are_removed(tmp_path):
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    own = tmp_path / f"{os.getpid()}-mine"
    kept = [own, tmp_path / f"{os.getppid()}-alive", tmp_path / "README"]
    gone = [tmp_path / f"{ended.pid}-dead", tmp_path / f"{os.getpid()}-predecessor"]
    for folder in kept + gone:
        folder.mkdir()
    remove_stale_folders(tmp_path, own)
    assert sorted(tmp_path.iterdir()) == sorted(kept)


def test_the_process_store_is_removed_when_the_process_exits():
    script = ("from ui import export_files\n"
              "found = export_files.store().prepare('k', 'f.csv', 4, lambda out: out.write(b'a'))\n"
              "print(found.path)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    path = Path(done.stdout.strip())
    assert path.is_relative_to(export_files.EXPORTS_DIR) and path.name == "f.csv"
    assert not path.parent.parent.exists()


def test_a_digest_is_computed_once_per_object_and_forgotten_with_it():
    digests = Fingerprints()
    record, twin = softmax_record(seed=3), softmax_record(seed=3)
    reads = []

    def content(of):
        reads.append(1)
        return (np.ascontiguousarray(of.weights),)

    assert digests.known(record) is None
    digest = digests.of(record, partial(content, record))
    assert digests.of(record, partial(content, record)) == digest and reads == [1]
    assert digests.known(twin) is None and digests.of(twin, partial(content, twin)) == digest
    assert digests.of(softmax_record(seed=4), lambda: (b"other",)) != digest
    del record, twin
    assert digests._digests == {}


def test_static_serving_is_on_and_the_store_fits_its_limits():
    from streamlit import file_util
    from streamlit.web.bootstrap import MAX_APP_STATIC_FOLDER_SIZE
    from streamlit.web.server.starlette.starlette_server_config import MAX_APP_STATIC_FILE_SIZE

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["enableStaticServing"] is True
    assert Path(file_util.get_app_static_dir(str(ROOT / "app.py"))) == export_files.STATIC_DIR
    assert export_files.EXPORTS_DIR.parent == export_files.STATIC_DIR
    assert export_files.MAX_EXPORT_BYTES <= MAX_APP_STATIC_FILE_SIZE
    assert export_files.EXPORT_DISK_BYTES < MAX_APP_STATIC_FOLDER_SIZE


# --- the pages ---------------------------------------------------------------------------------

def linked_files(at) -> dict[str, Path]:
    """File name -> the file on disk, for every download link on the page."""
    found = {}
    for element in at.html:
        for url, name in LINK.findall(element.value):
            assert url.startswith(export_files.STATIC_URL + "/exports/")
            found[name] = export_files.STATIC_DIR / url.removeprefix(export_files.STATIC_URL + "/")
    return found


def test_a_short_inputs_exports_are_links_to_files_written_once(default_model):
    at = run_page(state={"maps_layer": 2, "maps_head": 5})
    files = linked_files(at)
    stem = "sentence-transformers_all-MiniLM-L6-v2"
    assert sorted(files) == [f"{stem}.npz", f"{stem}_L2.json", f"{stem}_L2H5.csv"]
    # the data exports are links; only the figure files (drawn by Kaleido) wait for a button
    assert not at.get("download_button") and not [
        b for b in at.button if "Prepare" in b.label and not b.key.startswith("maps_figure_")]
    expected = reference_attentions(default_model, "Time flies like an arrow.")
    restored = load_npz(files[f"{stem}.npz"].read_bytes())
    np.testing.assert_allclose(restored.weights, expected, atol=1e-5)
    assert restored.tokens[:3] == ("[CLS]", "time", "flies")
    payload = json.loads(files[f"{stem}_L2.json"].read_text(encoding="utf-8"))
    np.testing.assert_allclose(payload["weights"], expected[2], atol=0.5e-4 + 1e-6)
    assert files[f"{stem}_L2H5.csv"].read_text().startswith("query \\ key,#0 [CLS],#1 time")
    written = {path: path.stat().st_mtime_ns for path in files.values()}
    at.run()
    assert linked_files(at) == files  # a rerun writes nothing
    assert {path: path.stat().st_mtime_ns for path in files.values()} == written


def test_a_large_export_is_written_when_asked_and_then_reused(default_model):
    text = " ".join(["the cat sat on the mat while the dog slept."] * 17)  # 189 tokens
    stem = "sentence-transformers_all-MiniLM-L6-v2"
    at = run_page(text=text)
    assert list(linked_files(at)) == [f"{stem}_L0H0.csv"]  # JSON and NPZ are over 2 MiB
    assert [at.button(key=key).label for key in ("maps_export_json", "maps_export_npz")] == [
        "Prepare layer as JSON", "Prepare all heads as NPZ"]
    at.button(key="maps_export_npz").click().run()
    assert_no_failure(at)
    files = linked_files(at)
    restored = load_npz(files[f"{stem}.npz"].read_bytes())
    expected = reference_attentions(default_model, text)
    assert restored.weights.shape == expected.shape == (6, 12, 189, 189)
    np.testing.assert_allclose(restored.weights, expected, atol=1e-5)
    at.toggle(key="maps_export_half").set_value(True).run()  # another file: asked for again
    assert f"{stem}_float16.npz" not in linked_files(at)
    assert at.button(key="maps_export_npz").label == "Prepare all heads as NPZ"
    at.toggle(key="maps_export_half").set_value(False).run()  # written already: shown at once
    assert linked_files(at)[f"{stem}.npz"] == files[f"{stem}.npz"]
    assert_no_failure(at)


def test_without_static_serving_the_page_says_why_there_are_no_downloads(monkeypatch):
    import streamlit

    monkeypatch.setattr(streamlit, "get_option", lambda key, original=streamlit.get_option: (
        False if key == "server.enableStaticServing" else original(key)))
    at = run_page()
    assert linked_files(at) == {}
    assert any("Downloads are off" in warning.value for warning in at.warning)


# --- the real thing ----------------------------------------------------------------------------

def download(page, link) -> bytes:
    with page.expect_download() as started:
        link.click()
    return Path(started.value.path()).read_bytes()


def test_the_browser_downloads_the_exports_from_disk(browser):
    from tests.browser_support import PAGES, guard_requests, served_app, set_sidebar_text, visit, wait_idle

    stem = "sentence-transformers_all-MiniLM-L6-v2"
    with served_app() as url:
        context = browser.new_context(viewport={"width": 1400, "height": 1600},
                                      accept_downloads=True)
        page = context.new_page()
        outside = guard_requests(page)
        visit(page, url, PAGES[0][0], PAGES[0][1])
        link = page.locator(f"a[download='{stem}.npz']")
        link.wait_for(timeout=60_000)
        data = download(page, link)
        restored = load_npz(data)
        assert restored.tokens[:3] == ("[CLS]", "time", "flies")
        assert restored.weights.shape == (6, 12, 8, 8)
        href = link.get_attribute("href")  # app/static/exports/<server's folder>/<random>/<name>
        served = export_files.EXPORTS_DIR / href.split("/")[3]
        assert served.is_dir() and served.name.split("-")[0].isdigit()
        request = urllib.request.Request(f"{url}/{href}", headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(request) as response:  # the file on disk, as it is
            assert response.headers["Content-Type"] == "application/zip"
            assert response.headers.get("Content-Encoding") is None  # not deflated twice
            assert response.read() == data
        payload = json.loads(download(page, page.locator(f"a[download='{stem}_L0.json']")))
        assert payload["layer"] == 0 and payload["tokens"][1] == "time"

        set_sidebar_text(page, " ".join(["the cat sat on the mat while the dog slept."] * 17))
        wait_idle(page)
        page.get_by_role("button", name="Prepare all heads as NPZ").click()
        link = page.locator(f"a[download='{stem}.npz']")
        link.wait_for(timeout=60_000)
        wait_idle(page)
        assert page.get_by_role("button", name="Prepare all heads as NPZ").count() == 0
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "export-links.png"), full_page=True)
        assert load_npz(download(page, link)).weights.shape == (6, 12, 189, 189)
        assert page.locator('[data-testid="stException"]').count() == 0
        assert page.get_by_text(GUARD_MESSAGE).count() == 0
        assert outside == []
        context.close()
    assert not served.exists()  # removed when the server stopped
