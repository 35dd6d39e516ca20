"""The generation page's result, kept in the session so moving a slider never generates again.

One result per session (the latest), keyed by its inputs: the decoder, the prompt and the
settings. A generation is specific to a session's request and cheap to redo, so it is not shared
across sessions.
"""

from __future__ import annotations

import streamlit as st

from models.errors import ModelLoadError
from models.generation import Generation, GenerationRefused, GenerationSettings, generate
from ui.state import decoder_with_progress
from ui.text import plain

RESULT_KEY = "generation_result"  # session key: (inputs, Generation)


def generation(decoder_name: str, prompt: str, settings: GenerationSettings) -> Generation | None:
    """The generation for these inputs, or None after telling the user in one sentence why not."""
    inputs = (decoder_name, prompt, settings)
    stored = st.session_state.get(RESULT_KEY)
    if stored is not None and stored[0] == inputs:
        return stored[1]
    if not prompt.strip():
        st.info("Type a sentence in the sidebar: it is the prompt the model continues.")
        return None
    try:
        loaded = decoder_with_progress(decoder_name)
    except ModelLoadError as error:
        st.error(plain(str(error)))
        return None
    bar = st.progress(0.0, text="Generating…")
    try:
        result = generate(
            loaded.model, loaded.tokenizer, prompt, settings, token_limit=loaded.max_tokens,
            source=loaded.name,
            progress=lambda done, total: bar.progress(done / total,
                                                      text=f"Generated {done} of {total} tokens…"),
        )
    except GenerationRefused as error:
        st.warning(plain(str(error)))
        return None
    finally:
        bar.empty()
    st.session_state[RESULT_KEY] = (inputs, result)
    return result
