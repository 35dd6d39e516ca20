"""First opens that take seconds say what is happening and show progress: a generation not kept
yet, and the toy translator trained for the first time on a machine (AppTest, the real app).

A progress bar is emptied once its work is done, so the finished page no longer holds it: the
tests record every text given to a progress bar or a spinner while the script runs."""

from __future__ import annotations

import pytest
import streamlit
from streamlit.delta_generator import DeltaGenerator

from models.teaching.trained_translator import TrainingSettings, is_cached
from models.loading.decoder import DEFAULT_DECODER
from tests.app_support import run_page, texts
from ui import generation_cache, seq2seq_cache


STEPS = 20  # the fewest the page's retraining box accepts as its starting value


@pytest.fixture
def progress_texts(monkeypatch) -> list[str]:
    """Every text a progress bar (new or updated) or a spinner shows during the runs."""
    seen: list[str] = []
    bar, spinner = DeltaGenerator.progress, DeltaGenerator.spinner

    def progress(self, value, text=None, **options):
        seen.append(text or "")
        return bar(self, value, text=text, **options)

    def spinning(self, text="", **options):
        seen.append(text)
        return spinner(self, text, **options)

    monkeypatch.setattr(DeltaGenerator, "progress", progress)
    monkeypatch.setattr(DeltaGenerator, "spinner", spinning)
    main = streamlit._main
    monkeypatch.setattr(streamlit, "progress", lambda *args, **kw: progress(main, *args, **kw))
    monkeypatch.setattr(streamlit, "spinner", lambda *args, **kw: spinning(main, *args, **kw))
    return seen


def test_a_new_generation_says_what_it_computes_and_counts_its_tokens(progress_texts):
    prompt = "A progress bar tells the class that"
    state = {"gen_new_tokens": 2}
    at = run_page("generation", text=prompt, state=state)
    assert "Generated:" in texts(at)
    first = generation_cache.generating_text(2, DEFAULT_DECODER)
    assert first in progress_texts  # the sentence, before the first token
    assert progress_texts.index(first) < progress_texts.index("Generated 1 of 2 tokens…")
    assert "Generated 2 of 2 tokens…" in progress_texts
    assert generation_cache.WAITING_TEXT in progress_texts  # shown to anyone waiting for it too
    progress_texts.clear()
    again = run_page("generation", text=prompt, state=state)  # a new session: kept, no bar
    assert "Generated:" in texts(again)
    assert not [text for text in progress_texts if text.startswith("Generat")], progress_texts


def test_the_toy_translators_first_training_says_so_and_counts_its_steps(
        progress_texts, monkeypatch, tmp_path):
    monkeypatch.setenv("ATTENTION_EXPLORER_CACHE", str(tmp_path))  # a machine that never trained
    tiny = TrainingSettings(steps=STEPS, batch_size=8, warmup_steps=1, snapshots=2, evaluate_batch=8)
    monkeypatch.setattr(seq2seq_cache, "TOY_SETTINGS", tiny)
    assert not is_cached(tiny)
    at = run_page("cross_attention")
    assert is_cached(tiny)  # it really trained, into this machine's cache
    assert "Training the toy translator (once per machine, under a minute)…" in progress_texts
    steps = [text for text in progress_texts if text.startswith("Training the toy translator: step")]
    assert [text.split(",")[0] for text in steps] == [
        f"Training the toy translator: step {step} of {STEPS}" for step in range(1, STEPS + 1)]
    assert at.get("plotly_chart"), "the page goes on to draw the trained model's attention"
    progress_texts.clear()
    run_page("cross_attention")
    assert not [text for text in progress_texts if text.startswith("Training")], progress_texts
