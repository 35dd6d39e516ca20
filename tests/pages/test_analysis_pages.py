"""AppTest of the head statistics, rollout and compare pages, asserting on the values they show."""

import base64
import io

import numpy as np
import pandas as pd
import pytest
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

from models.loading.pretrained import DEFAULT_MODEL
from models.loading.kinds import PRETRAINED
from models.loading.source import ModelSource
from tests.app_support import figure_titled, figures, run_page, texts
from ui import cache
from models.analysis.rollout import attention_rollout, head_average
from models.analysis.statistics import head_statistics
from models.analysis.token_options import merge_word_pieces

TEXT = "Time flies like an arrow."  # the sidebar default: 8 tokens with [CLS] and [SEP]
LAYERS, HEADS = 6, 12


def sidebar_record(text: str = TEXT, pair: str = ""):
    return cache.record(ModelSource(PRETRAINED, DEFAULT_MODEL), text, pair)


def z(figure: dict) -> np.ndarray:
    """A heatmap's z, decoded from Plotly's base64 typed-array JSON when it is one."""
    values = figure["data"][0]["z"]
    if isinstance(values, dict):
        flat = np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"])
        shape = [int(n) for n in str(values.get("shape", len(flat))).split(",")]
        return flat.reshape(shape)
    return np.asarray(values, dtype=float)


@pytest.fixture
def downloads(monkeypatch):
    """Every file handed to Streamlit's media storage during the run: (bytes, mimetype, name)."""
    saved = []
    original = MemoryMediaFileStorage.load_and_get_id

    def capture(self, path_or_data, mimetype, kind, filename=None):
        saved.append((path_or_data, mimetype, filename))
        return original(self, path_or_data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", capture)
    return saved


def test_statistics_table_has_a_row_per_head_and_downloads_as_csv(downloads):
    at = run_page("head_statistics")
    assert at.title[0].value == "Head statistics"
    shown = at.dataframe[0].value
    assert len(shown) == LAYERS * HEADS
    expected = head_statistics(sidebar_record())
    np.testing.assert_allclose(shown["entropy_bits"], expected["entropy_bits"], rtol=1e-6,
                               atol=1e-5)
    assert list(shown["label"]) == list(expected["label"])
    # MiniLM's layer 0 has a previous-token head (Clark et al. found them in BERT too)
    previous = shown[shown["label"] == "previous-token"]
    assert len(previous) >= 1 and previous["previous"].min() > 0.9
    csv = [data for data, mimetype, name in downloads if name == "head_statistics.csv"]
    assert len(csv) == 1 and at.get("download_button")[0].proto.label.endswith("CSV")
    from_csv = pd.read_csv(io.BytesIO(csv[0]))
    assert len(from_csv) == LAYERS * HEADS and list(from_csv.columns) == list(shown.columns)
    np.testing.assert_allclose(from_csv["previous"], shown["previous"], rtol=1e-5)
    grid = z(figure_titled(at, "for every layer and head"))
    assert grid.shape == (LAYERS, HEADS)
    np.testing.assert_allclose(grid.ravel(), shown["entropy_bits"], rtol=1e-5)
    assert "Select a row" in texts(at)


def test_selecting_a_row_opens_that_head_and_a_stale_row_is_ignored():
    at = run_page("head_statistics", state={
        "stats_table": {"selection": {"rows": [14], "columns": []}}, "stats_column": "cls"})
    opened = z(figure_titled(at, "Layer 1 · Head 2"))
    np.testing.assert_allclose(opened, sidebar_record().head(1, 2), atol=1e-5)
    grid = z(figure_titled(at, "cls for every layer and head"))
    np.testing.assert_allclose(grid.ravel(), at.dataframe[0].value["cls"], rtol=1e-5)
    stale = run_page("head_statistics", state={
        "stats_table": {"selection": {"rows": [999], "columns": []}}})
    assert len(figures(stale)) == 1 and "Select a row" in texts(stale)


def test_statistics_respect_hidden_special_tokens():
    at = run_page("head_statistics", state={"sb_hide_special": True})
    shown = at.dataframe[0].value
    assert shown["cls"].max() == 0.0 and shown["sep"].max() == 0.0
    assert "Special tokens ([CLS], [SEP]) are hidden" in texts(at)
    # layer 0 head 2 sends "time" to [CLS] with all but 1e-9 of its weight: that row is empty
    assert f"1 of {LAYERS * HEADS * 6} rows put all their weight on special tokens" in texts(at)


def test_rollout_page_states_the_formula_and_shows_rollout_next_to_raw():
    at = run_page("rollout", state={"rollout_layer": 3})
    assert "rownorm" in at.latex[0].value
    record = sidebar_record()
    raw = z(figure_titled(at, "Raw attention · layer 3"))
    rolled = z(figure_titled(at, "Rollout · layers 0 to 3"))
    assert raw.shape == rolled.shape == (record.num_tokens, record.num_tokens)
    np.testing.assert_allclose(raw, head_average(record)[3], atol=1e-5)
    np.testing.assert_allclose(rolled, attention_rollout(record)[3], atol=1e-5)
    np.testing.assert_allclose(rolled.sum(axis=-1), 1.0, atol=1e-5)


def test_rollout_respects_merged_word_pieces():
    text = "The unbelievably tokenizable sentence."
    at = run_page("rollout", text=text, state={"sb_merge_words": True})
    merged = merge_word_pieces(sidebar_record(text))
    assert merged.num_tokens < sidebar_record(text).num_tokens
    rolled = z(figure_titled(at, f"Rollout · layers 0 to {merged.num_layers - 1}"))  # the default
    np.testing.assert_allclose(rolled, attention_rollout(merged)[-1], atol=1e-5)
    assert "Word pieces merged" in texts(at)


def test_compare_page_ranks_heads_and_shows_the_top_one_side_by_side():
    at = run_page("compare")  # the sidebar's default sentence and the chapter's other half
    assert 'Second input: "Fruit flies like a banana."' in texts(at)
    table = at.dataframe[0].value
    assert len(table) == LAYERS * HEADS
    assert table["rank"].tolist() == list(range(1, LAYERS * HEADS + 1))
    assert table["difference"].is_monotonic_decreasing and table["difference"].iloc[0] > 0.05
    assert "position-aligned" in texts(at)
    assert z(figure_titled(at, "How differently")).shape == (LAYERS, HEADS)
    layer, head = int(table["layer"].iloc[0]), int(table["head"].iloc[0])
    first = z(figure_titled(at, f"First input · layer {layer}, head {head}"))
    second = z(figure_titled(at, f"Second input · layer {layer}, head {head}"))
    expected_first = sidebar_record(TEXT).head(layer, head)
    expected_second = sidebar_record("Fruit flies like a banana.").head(layer, head)
    np.testing.assert_allclose(first, expected_first, atol=1e-5)
    np.testing.assert_allclose(second, expected_second, atol=1e-5)


def test_compare_page_uses_the_sidebars_two_sentences_and_a_chosen_head():
    at = run_page("compare", text="Mario jumps.", pair="fruit flies",
                  state={"compare_head": "2-5"})
    assert "Second input: the sidebar's second sentence" in texts(at)
    assert not [box for box in at.main.text_input]  # no sentence boxes of its own
    assert "5 and 4 tokens" in texts(at)
    assert "aligned_jsd" not in at.dataframe[0].value.columns
    first = z(figure_titled(at, "First input · layer 2, head 5"))
    np.testing.assert_allclose(first, sidebar_record("Mario jumps.").head(2, 5), atol=1e-5)
    second = z(figure_titled(at, "Second input · layer 2, head 5"))
    np.testing.assert_allclose(second, sidebar_record("fruit flies").head(2, 5), atol=1e-5)


def test_compare_page_falls_back_from_a_head_that_no_longer_exists():
    at = run_page("compare", state={"compare_head": "99-99", "sb_hide_special": True})
    table = at.dataframe[0].value
    layer, head = int(table["layer"].iloc[0]), int(table["head"].iloc[0])
    assert z(figure_titled(at, f"First input · layer {layer}, head {head}")).shape == (6, 6)
    assert "are hidden" in texts(at)
