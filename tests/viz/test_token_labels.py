"""Tokens shown as words, by one function (viz.labels.display_tokens), on the real tokenizers of
SmolLM2 (byte-level BPE: "Ġ") and MiniLM (WordPiece), and on SentencePiece's "▁"; the raw token
stays on hover."""

from __future__ import annotations

import numpy as np

from models.hooks.record import AttentionRecord
from viz.bertviz_views import _visible_tokens
from viz.heatmap import attention_heatmap
from viz.labels import display_tokens, raw_differs, token_text

TEXT = "The café's capital of France is Paris.\nNew line"


def test_smollm2s_tokens_read_as_the_words_the_tokenizer_decodes(decoder_runner):
    tokenizer = decoder_runner.tokenizer
    ids = tokenizer(TEXT)["input_ids"]
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert any(token.startswith("Ġ") for token in tokens)
    words = display_tokens(tokens)
    expected = [tokenizer.decode([i]).replace("\n", "↵").strip(" ") or
                tokenizer.decode([i]) for i in ids]
    assert words == expected
    assert not any("Ġ" in word or "Ċ" in word for word in words)
    assert "café" in "".join(words) and "Paris" in words
    assert token_text(tokens[1], tokens) == words[1]


def test_minilms_wordpiece_tokens_are_words_already_and_stay_as_written(default_model):
    tokenizer = default_model.tokenizer
    tokens = tokenizer.convert_ids_to_tokens(tokenizer("Unbelievably, the jumping cat.")["input_ids"])
    assert any(token.startswith("##") for token in tokens)
    assert display_tokens(tokens) == tokens and not raw_differs(tokens)


def test_sentencepiece_word_markers_become_spaces_and_are_dropped():
    assert display_tokens(["▁The", "▁capital", "▁of", "▁Par", "is", "."]) == \
        ["The", "capital", "of", "Par", "is", "."]


def test_maps_and_bertviz_show_words_and_the_hover_keeps_the_raw_tokens():
    tokens = ("The", "Ġcat", "Ġsat", ".")
    weights = np.tril(np.ones((4, 4), dtype=np.float32))
    weights /= weights.sum(-1, keepdims=True)
    record = AttentionRecord(tokens, [weights[None]], source="test", masks=("causal",))
    figure = attention_heatmap(record, 0, 0)
    assert list(figure.data[0].x) == ["The #0", "cat #1", "sat #2", ". #3"]
    assert figure.data[0].customdata[1][2].tolist() == ["Ġcat", "Ġsat"]
    assert "as the tokenizer wrote them" in figure.data[0].hovertemplate
    assert _visible_tokens(record) == ("The", "cat", "sat", ".")
    words = AttentionRecord(("the", "cat"), [np.full((1, 2, 2), 0.5, np.float32)], source="t")
    assert attention_heatmap(words, 0, 0).data[0].customdata is None  # nothing to add on hover
