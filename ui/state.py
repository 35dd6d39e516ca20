"""The sidebar shared by every page, and the current record it selects."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from models.decoder import DEFAULT_DECODER, prepare_default_decoder
from models.pretrained import DEFAULT_MODEL, ModelLoadError, UnsupportedModelType
from models.record import AttentionRecord
from ui import cache

DEFAULT_TEXT = "Time flies like an arrow."
MODEL_NAME = "model_name"  # session key: the pretrained encoder in use
DECODER_NAME = "decoder_name"  # session key: the pretrained causal decoder in use
LOAD_MESSAGE = "model_load_message"

KIND_LABELS = {
    cache.PRETRAINED: "Pretrained encoder (BERT-like)",
    cache.DECODER: "Pretrained causal decoder",
    cache.SCRATCH_RANDOM: "From-scratch encoder, random weights",
    cache.SCRATCH_COPIED: "From-scratch encoder, pretrained weights copied in",
}

def _load_other_model() -> None:
    """Button callback: switch models only when the new one loads (an encoder, else a decoder)."""
    name = st.session_state.get("sb_model_input", "").strip()
    try:
        cache.pretrained(name)
        slot, kind = MODEL_NAME, cache.PRETRAINED
    except UnsupportedModelType:
        try:
            cache.decoder(name)
            slot, kind = DECODER_NAME, cache.DECODER
        except ModelLoadError as error:
            st.session_state[LOAD_MESSAGE] = ("error", str(error))
            return
    except ModelLoadError as error:
        st.session_state[LOAD_MESSAGE] = ("error", str(error))
        return
    st.session_state[slot] = name
    st.session_state["sb_kind"] = kind
    st.session_state[LOAD_MESSAGE] = ("success", f"Loaded '{name}'.")


def _model_caption(kind: str) -> str:
    if kind == cache.DECODER:
        return f"Decoder: **{st.session_state[DECODER_NAME]}**"
    if kind == cache.SCRATCH_RANDOM:
        return f"Tokenizer from **{st.session_state[MODEL_NAME]}**"
    return f"Pretrained model: **{st.session_state[MODEL_NAME]}**"


def sidebar() -> None:
    """Render the shared inputs. Values persist across pages because app.py renders them."""
    st.session_state.setdefault(MODEL_NAME, DEFAULT_MODEL)
    st.session_state.setdefault(DECODER_NAME, DEFAULT_DECODER)
    with st.sidebar:
        st.text_area("Sentence", value=DEFAULT_TEXT, key="sb_text", height=90,
                     help="Any text; longer than the model's limit is truncated with a notice.")
        st.text_input("Second sentence (optional, makes a pair)", key="sb_pair",
                      placeholder="e.g. Fruit flies like a banana.")
        st.radio("Model", list(KIND_LABELS), format_func=KIND_LABELS.get, key="sb_kind")
        if st.session_state.sb_kind == cache.SCRATCH_RANDOM:
            st.number_input("Seed", min_value=0, max_value=2**31 - 1, value=0, step=1, key="sb_seed")
        st.caption(_model_caption(st.session_state.sb_kind))
        st.toggle("Merge word pieces into words", key="sb_merge_words",
                  help="A word's row is the mean of its pieces' rows; its column the sum of "
                       "its pieces' columns, so rows still add up to 1.")
        st.toggle("Hide special tokens", key="sb_hide_special",
                  help="Drops [CLS], [SEP] and the like; every row is renormalised to 1.")
        with st.expander("Use another pretrained model"):
            st.text_input("Hugging Face model id or local folder", key="sb_model_input",
                          placeholder="bert-base-uncased, gpt2 or /path/to/folder")
            st.button("Load", key="sb_model_load", on_click=_load_other_model)
            st.caption("Only .safetensors weights are read and no remote code runs.")
            message = st.session_state.get(LOAD_MESSAGE)
            if message:
                (st.error if message[0] == "error" else st.success)(message[1])


@dataclass(frozen=True)
class Choice:
    """What the sidebar asks for: which model, and which text."""

    kind: str
    name: str
    seed: int
    text: str
    pair: str

    @property
    def key(self) -> tuple[str, str, int, str, str]:
        return (self.kind, self.name, self.seed, self.text, self.pair)


def current_choice() -> Choice:
    kind = st.session_state.get("sb_kind", cache.PRETRAINED)
    return Choice(
        kind=kind,
        name=(st.session_state.get(DECODER_NAME, DEFAULT_DECODER) if kind == cache.DECODER
              else st.session_state.get(MODEL_NAME, DEFAULT_MODEL)),
        seed=int(st.session_state.get("sb_seed", 0)) if kind == cache.SCRATCH_RANDOM else 0,
        text=st.session_state.get("sb_text", DEFAULT_TEXT) or "",
        pair=(st.session_state.get("sb_pair") or "").strip(),
    )


def current_record(apply_options: bool = True) -> AttentionRecord | None:
    """The record for the sidebar's input, or None after telling the user why there is none.

    With `apply_options`, the sidebar's token options (merge word pieces, hide special tokens)
    are applied; views whose numbers only exist per model token pass False.
    """
    choice = current_choice()
    kind, name, seed, text, pair = choice.key
    if not text.strip():
        st.info("Type a sentence in the sidebar to see its attention.")
        return None
    if kind == cache.SCRATCH_COPIED and cache.pretrained(name).model_type != "bert":
        st.warning(f"Weights can be copied only from a BERT model; '{name}' is not one.")
        return None
    try:
        if kind == cache.DECODER:
            _load_decoder_with_progress(name)
        result = cache.record(kind, name, seed, text, pair)
    except (ModelLoadError, ValueError) as error:
        st.error(str(error))
        return None
    if result.dropped_tokens:
        st.warning(
            f"The input is longer than the model's limit of {result.num_tokens} tokens: "
            f"the last {result.dropped_tokens} tokens were dropped."
        )
    if kind == cache.SCRATCH_COPIED:
        difference = cache.copied_difference(name, text, pair)
        st.success(
            f"With the weights copied in, the from-scratch encoder reproduces {name}: the largest "
            f"difference from its attention, over all {result.num_layers} × {result.num_heads} "
            f"heads of this input, is {difference:.1e}."
        )
    if not apply_options:
        return result
    merge = bool(st.session_state.get("sb_merge_words"))
    hide = bool(st.session_state.get("sb_hide_special"))
    if not (merge or hide):
        return result
    view = cache.token_view(kind, name, seed, text, pair, merge, hide)
    for note in view.notes:
        st.caption(note)
    return view.record


def _load_decoder_with_progress(name: str) -> None:
    """The first use on a machine converts the embedded SmolLM2 (~20 s): show its progress."""
    if name == DEFAULT_DECODER:
        bar = st.progress(0.0, text="Preparing SmolLM2 (once per machine, about 20 s)…")
        try:
            prepare_default_decoder(lambda fraction, message: bar.progress(fraction, text=message))
        finally:
            bar.empty()
    cache.decoder(name)


def index_slider(label: str, count: int, key: str, container=st) -> int:
    """A 0-based index picker that stays valid when the input or model changes."""
    if count == 1:
        container.caption(f"{label}: 0 (the only one)")
        return 0
    value = st.session_state.get(key)
    if value is not None and not 0 <= value < count:
        st.session_state[key] = max(0, min(int(value), count - 1))
    return container.slider(label, 0, count - 1, key=key)
