"""Models load once per server process; records are computed once per (text, model).

Records are immutable (frozen dataclass, read-only array), so they are kept with
`st.cache_resource` and handed out without the copy `st.cache_data` makes on every read;
the entry count bounds the memory they take.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from models.arithmetic import Projections, projections_for
from models.config import EncoderConfig
from models.decoder import load_decoder, run_decoder
from models.encoder import Encoder
from models.pretrained import LoadedModel, load_pretrained, run_pretrained
from models.record import AttentionRecord
from models.scratch import random_encoder, run_encoder
from models.tokenize import encode
from models.transfer import encoder_from_bert
from viz.bertviz_views import view_html
from viz.tokens import TokenView, apply_token_options

MAX_RECORDS = 48
RECORD_TTL_SECONDS = 3600

PRETRAINED = "pretrained"
DECODER = "decoder"
SCRATCH_RANDOM = "scratch-random"
SCRATCH_COPIED = "scratch-copied"


def scratch_config(vocab_size: int) -> EncoderConfig:
    """The small from-scratch encoder used with random weights (textbook-sized)."""
    return EncoderConfig(vocab_size=vocab_size, hidden_size=128, num_heads=4, num_layers=4,
                         intermediate_size=512, norm_style="pre")


@st.cache_resource(show_spinner="Loading the model (once per server)…")
def pretrained(name: str) -> LoadedModel:
    return load_pretrained(name)


@st.cache_resource(show_spinner="Loading the decoder (once per server)…")
def decoder(name: str) -> LoadedModel:
    """A causal decoder. The embedded SmolLM2 must first be converted (ui.state does that,
    showing progress); the load here then reads the converted copy."""
    return load_decoder(name)


@st.cache_resource(show_spinner="Copying the pretrained weights into the from-scratch encoder…")
def copied_encoder(name: str) -> Encoder:
    return encoder_from_bert(pretrained(name).model)


@st.cache_resource(show_spinner="Building the from-scratch encoder…")
def seeded_encoder(name: str, seed: int) -> Encoder:
    return random_encoder(scratch_config(len(pretrained(name).tokenizer)), seed)


def source_label(kind: str, name: str, seed: int) -> str:
    if kind == SCRATCH_RANDOM:
        return f"from-scratch encoder, random weights (seed {seed})"
    if kind == SCRATCH_COPIED:
        return f"from-scratch encoder with {name}'s weights"
    return name


@st.cache_resource(max_entries=MAX_RECORDS, ttl=RECORD_TTL_SECONDS, show_spinner="Running the model…")
def record(kind: str, name: str, seed: int, text: str, pair: str) -> AttentionRecord:
    """`name` is the decoder's name for DECODER, else the pretrained encoder's."""
    if kind == DECODER:
        return run_decoder(decoder(name), text, pair or None)
    loaded = pretrained(name)
    label = source_label(kind, name, seed)
    if kind == PRETRAINED:
        return run_pretrained(loaded, text, pair or None)
    return run_encoder(model_for(kind, name, seed), loaded.tokenizer, text, pair or None, label)


def model_for(kind: str, name: str, seed: int):
    """The torch module behind a model choice."""
    if kind == DECODER:
        return decoder(name).model
    if kind == SCRATCH_COPIED:
        return copied_encoder(name)
    if kind == SCRATCH_RANDOM:
        return seeded_encoder(name, seed)
    return pretrained(name).model


@st.cache_resource(max_entries=16, ttl=RECORD_TTL_SECONDS,
                   show_spinner="Reading the model's query, key and value vectors…")
def projections(kind: str, name: str, seed: int, text: str, pair: str) -> Projections:
    loaded = decoder(name) if kind == DECODER else pretrained(name)
    model = model_for(kind, name, seed)
    limit = loaded.max_tokens if kind in (PRETRAINED, DECODER) else model.config.max_positions
    return projections_for(model, encode(loaded.tokenizer, text, pair or None, limit))


@st.cache_resource(max_entries=MAX_RECORDS, ttl=RECORD_TTL_SECONDS, show_spinner=False)
def token_view(kind: str, name: str, seed: int, text: str, pair: str,
               merge_words: bool, hide_special: bool) -> TokenView:
    """The record after the sidebar's token options, computed once per input and options."""
    return apply_token_options(record(kind, name, seed, text, pair), merge_words, hide_special)


@st.cache_resource(max_entries=MAX_RECORDS, ttl=RECORD_TTL_SECONDS, show_spinner=False)
def copied_difference(name: str, text: str, pair: str) -> float:
    """Largest |attention difference| between the copied-weights encoder and the model itself."""
    ours = record(SCRATCH_COPIED, name, 0, text, pair)
    reference = record(PRETRAINED, name, 0, text, pair)
    return float(np.abs(ours.weights - reference.weights).max())


@st.cache_data(max_entries=4, show_spinner="Building bertviz's view…")
def bertviz_html(record: AttentionRecord, view: str) -> str:
    """The same HTML for the same input, so the frame is not rebuilt and redrawn on every rerun."""
    return view_html(record, view)
