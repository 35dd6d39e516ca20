"""The Corpus page (AppTest through app.py) draws its four views on a small shipped corpus and
refuses a folder that holds no analysis with one sentence; the drawings hold what they are
given, and 100,000 points are drawn with WebGL."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.app_support import APP, TIMEOUT_S, array, assert_no_failure, figures, shown, texts
from tests.corpus.support import PASSAGES, write_lines
from models.corpus import shipped
from viz.corpus import (BY_LABEL, BY_TOKEN, MAP_FRAME_PX, MAP_PX, MAP_ROW_PX, heads_layout_figure,
                        measure_map, points_figure)


@pytest.fixture
def small_shipped_corpus(tmp_path, monkeypatch):
    monkeypatch.setattr(shipped, "SHIPPED_CORPUS", write_lines(tmp_path))
    monkeypatch.setenv("ATTENTION_EXPLORER_CACHE", str(tmp_path / "cache"))
    return tmp_path


def test_the_page_draws_its_four_views_on_the_shipped_corpus(small_shipped_corpus):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.switch_page("pages/corpus.py")
    at.run()
    assert_no_failure(at)
    assert not at.error, [e.value for e in at.error]
    measure, heads, points = figures(at)
    assert array(measure["data"][0]["z"]).shape == (6, 12)
    assert "std" in measure["data"][0]["hovertemplate"]
    assert sum(len(array(trace["x"])) for trace in heads["data"]) == 72
    assert {trace["type"] for trace in points["data"]} == {"scattergl"}
    sampled = sum(len(array(trace["x"])) for trace in points["data"])
    assert sampled % 2 == 0 and sampled > 0
    assert f"{len(PASSAGES)} passages" in texts(at)
    frames = at.dataframe
    assert len(frames) == 3
    links = frames[0].value["open"].tolist()
    columns = list(frames[0].value.columns)  # the link before the passage's text, which may be
    assert columns.index("open") < columns.index("text")  # long: the link stays on the screen
    assert all(link.startswith("./?text=") and "layer=0" in link and "head=0" in link
               for link in links)
    at.radio(key="corpus_head_colour").set_value(BY_LABEL)
    at.slider(key="corpus_layer").set_value(3)
    at.run()
    assert_no_failure(at)
    assert "layer=3" in at.dataframe[0].value["open"].iloc[0]
    assert len(figures(at)[1]["data"]) >= 1


def test_a_folder_without_an_analysis_is_one_sentence(small_shipped_corpus):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.switch_page("pages/corpus.py")
    at.session_state["corpus_source"] = "A folder from the command line"
    at.session_state["corpus_folder"] = str(small_shipped_corpus)
    at.run()
    assert_no_failure(at)
    assert len(at.error) == 1
    assert (f"{small_shipped_corpus} holds no finished corpus analysis (it has no corpus.json)."
            in texts(at))
    assert not figures(at)


def test_the_drawings_hold_what_they_are_given():
    heads = pd.DataFrame({"layer": np.repeat([0, 1], 3), "head": np.tile([0, 1, 2], 2),
                          "label": ["broad", "local", "broad", "[SEP] sink", "local", "broad"],
                          "entropy_mean": np.arange(6.0), "entropy_std": np.arange(6.0) / 10,
                          "entropy_passages": np.full(6, 9)})
    figure = measure_map(heads, "entropy")
    np.testing.assert_array_equal(array(figure.data[0].z), np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(np.asarray(figure.data[0].customdata)[..., 0],
                                  (np.arange(6.0) / 10).reshape(2, 3))
    deep = pd.DataFrame({"layer": np.repeat(np.arange(30), 9), "head": np.tile(np.arange(9), 30),
                         "entropy_mean": np.ones(270), "entropy_std": np.zeros(270),
                         "entropy_passages": np.ones(270)})
    assert figure.layout.height == MAP_PX  # a few layers: the height beside the introduction
    assert measure_map(deep, "entropy").layout.height >= MAP_FRAME_PX + 30 * MAP_ROW_PX
    layout = heads_layout_figure(np.arange(12.0).reshape(6, 2), heads, BY_LABEL)
    assert sorted(trace.name for trace in layout.data) == ["[SEP] sink", "broad", "local"]
    assert sum(len(trace.x) for trace in layout.data) == 6


def test_100000_points_are_drawn_with_webgl():
    count = 50_000
    rng = np.random.default_rng(0)
    plane = rng.normal(size=(2 * count, 2))
    tokens = rng.choice(["the", "cat", ".", "[CLS]", "a", "dog"], size=count)
    figure = points_figure(plane, tokens, rng.integers(0, 900, count),
                           rng.integers(0, 60, count), 1, 2)
    assert [trace.type for trace in figure.data] == ["scattergl", "scattergl"]
    assert [len(trace.x) for trace in figure.data] == [count, count]
    np.testing.assert_array_equal(figure.data[1].x, plane[count:, 0])
    by_token = points_figure(plane, tokens, np.zeros(count, int), np.zeros(count, int), 1, 2,
                             BY_TOKEN)
    assert sum(len(trace.x) for trace in by_token.data) == 2 * count
    with pytest.raises(ValueError, match="queries and"):
        points_figure(plane[:10], tokens, tokens, tokens, 0, 0)


def test_the_model_label_and_corpus_name_are_shown_as_typed(small_shipped_corpus):
    """A label with Markdown in it (a folder's name, a Hugging Face id) is shown as text."""
    import json

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.switch_page("pages/corpus.py")
    at.run()
    assert_no_failure(at)
    (summary_path,) = (small_shipped_corpus / "cache" / "corpus").rglob("corpus.json")
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    summary["model"]["label"] = "**bold** [a link](http://example.org) _x_"
    summary_path.write_text(json.dumps(summary), encoding="utf-8")
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.switch_page("pages/corpus.py")
    at.session_state["corpus_source"] = "A folder from the command line"
    at.session_state["corpus_folder"] = str(summary_path.parent)
    at.run()
    assert_no_failure(at)
    (caption,) = [element.value for element in at.caption if "passages" in element.value
                  and "tokens ·" in element.value]
    assert summary["model"]["label"] in shown(caption)
    assert "**bold**" not in caption and "](" not in caption  # escaped, not Markdown
