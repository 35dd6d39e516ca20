"""The bertviz views page under AppTest: the real app.py, the real default model."""

from __future__ import annotations

import json
import re

import numpy as np

from models.analysis.token_options import apply_token_options
from tests.app_support import run_page, texts
from viz.bertviz_views import MAX_TOKENS, WEIGHT_DECIMALS, WINDOW_TOKENS

PAGE = "bertviz_views"


def frames(at) -> list[str]:
    """The HTML of every st.iframe the page rendered."""
    return [element.proto.srcdoc for element in at.get("iframe")]


def page_data(html: str) -> dict:
    return json.loads(re.search(r"const params = (\{.*?\}); // HACK", html).group(1))


def test_pair_shows_head_view_then_model_view_offline():
    at = run_page(PAGE, text="Time flies like an arrow.", pair="Fruit flies like a banana.")
    assert at.title[0].value == "bertviz views"
    (html,) = frames(at)
    entries = page_data(html)["attention"]
    assert [e["name"] for e in entries][3] == "Sentence A -> Sentence B"
    tokens = entries[0]["left_text"]
    assert tokens[0] == "[CLS]" and "banana" in tokens and tokens.count("[SEP]") == 2
    assert entries[3]["right_text"] == tokens[tokens.index("[SEP]") + 1:]
    assert '<select id="layer">' in html and "cdnjs" not in html
    assert f"{len(tokens)} tokens" in texts(at)

    at.radio(key="bertviz_view").set_value("model").run()
    assert not at.exception
    (html,) = frames(at)
    assert '"display_mode": "light"' in html and '<select id="layer">' not in html


def test_typed_markup_reaches_the_frame_only_escaped():
    at = run_page(PAGE, text="<b>bold</b> & done")
    (html,) = frames(at)
    tokens = page_data(html)["attention"][0]["left_text"]
    assert "<" in tokens and "&" in tokens and "bold" in tokens
    assert '"\\u003c", "b", "\\u003e"' in html and '"\\u0026"' in html
    assert "<b>" not in html


def test_a_longer_input_is_drawn_as_an_exact_window_that_a_slider_moves(encoder_runner):
    words = [f"w{i}" for i in range(MAX_TOKENS + 20)]  # over bertviz's limit: a window of it
    at = run_page(PAGE, text=" ".join(words),
                  state={"bertviz_window_start": 10, "sb_merge_words": True})
    (html,) = frames(at)
    entries = page_data(html)["attention"]
    tokens = entries[0]["left_text"]
    assert len(tokens) == WINDOW_TOKENS and tokens[0] == "w9"  # position 10: [CLS] is position 0
    assert f"Tokens 10–{10 + WINDOW_TOKENS - 1} of {MAX_TOKENS + 22:,} tokens" in texts(at)
    record = apply_token_options(encoder_runner.run(" ".join(words)).record, True, False).record
    window = record.weights[:, :, 10:10 + WINDOW_TOKENS, 10:10 + WINDOW_TOKENS]
    drawn = np.array(entries[0]["attn"])  # (L, H, W, W), rounded for the page
    np.testing.assert_allclose(drawn, window, atol=10 ** -WEIGHT_DECIMALS)

    short_for_head_view = " ".join(["word"] * 80)  # fits the head view, not the whole model view
    at = run_page(PAGE, text=short_for_head_view)
    assert len(frames(at)) == 1
    at.radio(key="bertviz_view").set_value("model").run()
    # 82 tokens: 150,000 lines are 22 thumbnails, so the model view starts with one layer
    assert at.multiselect(key="bertviz_layers").value == [0]
    assert at.multiselect(key="bertviz_heads").value == list(range(12))
    (html,) = frames(at)
    assert '"include_layers": [0]' in html
    at.multiselect(key="bertviz_layers").set_value(list(range(6))).run()
    assert frames(at) == []
    assert "up to 45 tokens" in at.info[0].value


def test_token_options_reach_bertviz_with_the_pair_filter_kept():
    at = run_page(PAGE, text="Transformers tokenize unbelievably.", pair="Fine.",
                  state={"sb_merge_words": True, "sb_hide_special": True})
    (html,) = frames(at)
    entries = page_data(html)["attention"]
    tokens = entries[0]["left_text"]
    assert "[CLS]" not in tokens and "[SEP]" not in tokens
    assert "unbelievably" in tokens and not any(t.startswith("##") for t in tokens)
    assert entries[2]["left_text"] == tokens[-2:]  # Sentence B -> Sentence B: "fine", "."
