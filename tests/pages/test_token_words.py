"""Tokens are shown as words: on the ablation, head finder, adaptive span and head detector
pages a SmolLM2 (byte-level BPE) input's labels carry no "Ġ"; the raw token stays on hover where
the figure has one; figure export titles read as words too."""

from __future__ import annotations

import json

import pytest

from models.analysis.repeated_tokens import DEFAULT_REPEAT_LENGTH
from tests.app_support import assert_no_failure, figures, run_page, texts
from viz.export_figures import title_for

DECODER = {"sb_kind": "decoder"}
TEXT = "Time flies like an arrow."
MARKERS = ("Ġ", "▁")


def labels(at) -> str:
    """Everything a reader sees as a label: text, tables, choices, and each figure's titles,
    axis labels and tick labels (not its hover data, which keeps the raw tokens)."""
    parts = [texts(at)]
    for table in at.dataframe:
        parts.append(table.value.to_csv())
    for kind in ("selectbox", "multiselect", "radio"):
        for widget in at.get(kind):
            parts.extend(str(option) for option in widget.options)
    for figure in figures(at):
        parts.append(json.dumps(figure.get("layout", {}), ensure_ascii=False))
        for trace in figure["data"]:
            parts.extend(json.dumps(trace.get(axis), ensure_ascii=False)
                         for axis in ("x", "y", "text", "name"))
    return "\n".join(parts)


def assert_words(at) -> str:
    assert_no_failure(at)
    assert not at.error, [e.value for e in at.error]
    shown = labels(at)
    assert not [marker for marker in MARKERS if marker in shown], \
        [line for line in shown.splitlines() if any(m in line for m in MARKERS)][:5]
    return shown


def test_the_decoders_tokens_are_byte_level(smollm2_model):
    """What the tests below rely on: SmolLM2 writes 'Ġflies', so a label could show it."""
    tokens = smollm2_model.tokenizer.tokenize(TEXT)
    assert "Ġflies" in tokens and "Ġarrow" in tokens


def test_ablation_choices_are_words():
    at = run_page("ablation", text=TEXT, state=DECODER)
    shown = assert_words(at)
    options = at.selectbox(key="ablation_ko_query").options
    assert "flies (#1)" in options and "arrow (#4)" in options
    assert "flies (#1)" in shown


def test_head_finder_names_keys_as_words():
    at = run_page("head_finder", text=TEXT,
                  state={**DECODER, "finder_query": "arrow", "finder_keys": "flies, like"})
    shown = assert_words(at)
    table = next(t.value for t in at.dataframe if "strongest key" in t.value.columns)
    strongest = set(table["strongest key"])
    assert strongest and strongest <= {"Time", "flies", "like", "an", "arrow", "."}
    assert "Keys: flies #1, like #2" in shown


def test_adaptive_span_bars_are_words_with_the_raw_token_on_hover():
    at = run_page("adaptive_span", text=TEXT, state=DECODER)
    assert_words(at)
    bars = next(f for f in figures(at) if f["layout"]["title"]["text"].startswith(
        "Attention mass removed per query row"))["data"][0]
    assert bars["x"][:2] == ["Time #0", "flies #1"]
    assert "as the tokenizer wrote it: Ġflies" in bars["customdata"][1][0]


def test_head_detectors_list_the_random_tokens_as_words():
    at = run_page("head_detectors", text=TEXT, state={**DECODER, "detectors_kind": "induction"})
    shown = assert_words(at)
    assert f"Measured on {DEFAULT_REPEAT_LENGTH} tokens drawn at random" in shown


def test_export_titles_read_as_words(smollm2_model):
    tokens = smollm2_model.tokenizer.tokenize(TEXT)
    title = title_for("Attention map", tokens, 3, 1)
    assert title == "Attention map · layer 3 · head 1 · Time flies like an arrow ."


def test_the_command_lines_figure_export_titles_and_labels_words(capsys, tmp_path):
    from cli import main as cli

    out = tmp_path / "map.html"
    status = cli.main(["export", "--model", "decoder", "--text", TEXT, "--view", "heatmap",
                       "--layer", "2", "--head", "1", "--format", "html", "--out", str(out)])
    assert status == 0, capsys.readouterr().err
    page = out.read_text(encoding="utf-8")
    assert "<title>Attention map · layer 2 · head 1 · Time flies like an arrow .</title>" in page
    figure = page[page.rindex("Plotly.newPlot("):]  # the figure's JSON, after plotly.js
    assert '"flies #1"' in figure  # the axis labels are words
    assert not [written for written in ('"Ġflies #1"', '"\\u0120flies #1"') if written in figure]


def test_cross_attention_shows_sentencepiece_tokens_as_words(tmp_path):
    """A tiny T5 whose tokenizer marks each word's start with '▁', as T5's and Marian's do."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    from tests.loading.test_hf_seq2seq import EOS, SPECIALS, WORDS, build

    folder = build("t5", tmp_path / "t5")
    vocabulary = {token: i for i, token in enumerate(SPECIALS + tuple(f"▁{w}" for w in WORDS))}
    tokenizer = Tokenizer(models.WordLevel(vocabulary, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A $B </s>", special_tokens=[("</s>", EOS)])
    written = PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>",
                                      eos_token="</s>", unk_token="<unk>", bos_token="<s>")
    assert written.tokenize("la voiture") == ["▁la", "▁voiture"]  # a label could show '▁'
    written.save_pretrained(folder)
    at = run_page("cross_attention", state={"xattn_model": "hub"})
    at.text_input(key="xattn_hf_input").set_value(str(folder))
    at.button(key="xattn_hf_load").click().run()
    at.text_input(key="xattn_target").set_value("la voiture rouge est rapide").run()
    shown = assert_words(at)
    assert "reading *<pad>*, the decoder wrote **la**." in shown
    maps = [f for f in figures(at) if f["data"][0].get("customdata") is not None]
    hover = json.dumps([f["data"][0]["customdata"] for f in maps], ensure_ascii=False)
    assert "▁voiture" in hover  # the raw token stays on hover
