"""The generation page's results, kept so moving a slider never generates again.

A generation is determined by its inputs (the decoder, the prompt and the settings: sampling is
seeded), so it is kept once per server, keyed by them, in the byte-bounded store shared with the
other pages (models.store.stores.RESULTS): a session's 100 steps over a long prompt hold each step's
attention row for every layer and head, over a hundred megabytes, and thirty sessions each
keeping their own would bound nothing.
"""

from __future__ import annotations

import streamlit as st

from models.errors import ModelLoadError
from models.experiments.generation import Generation, GenerationRefused, GenerationSettings, generate
from models.store import stores
from models.store.keys import result_key
from ui.byte_caches import kept
from ui.state import decoder_with_progress
from ui.text import plain


WAITING_TEXT = ("Generating this continuation (a few seconds the first time; then it is kept for "
                "everyone who asks for the same one)…")


def generating_text(new_tokens: int, model: str) -> str:
    """The progress bar's first sentence: what is being computed, and that it takes a moment."""
    return (f"Generating {new_tokens} new tokens with {model}, one forward pass per token: each "
            "step's attention is recorded…")


def generation(decoder_name: str, prompt: str, settings: GenerationSettings) -> Generation | None:
    """The generation for these inputs, or None after telling the user in one sentence why not.

    Only a generation not kept yet loads the decoder and shows a progress bar."""
    if not prompt.strip():
        st.info("Type a sentence in the sidebar: it is the prompt the model continues.")
        return None

    def compute() -> Generation:
        loaded = decoder_with_progress(decoder_name)
        bar = st.progress(0.0, text=generating_text(settings.new_tokens, loaded.name))
        try:
            return generate(
                loaded.model, loaded.tokenizer, prompt, settings, token_limit=loaded.max_tokens,
                source=loaded.name,
                progress=lambda done, total: bar.progress(
                    done / total, text=f"Generated {done} of {total} tokens…"),
            )
        finally:
            bar.empty()

    try:
        return kept(stores.RESULTS, result_key("generation", decoder_name, prompt, settings),
                    compute, WAITING_TEXT)
    except ModelLoadError as error:
        st.error(plain(str(error)))
    except GenerationRefused as error:
        st.warning(plain(str(error)))
    return None
