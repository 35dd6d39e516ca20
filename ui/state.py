"""The sidebar shared by every page, the one input object it yields, and the current trace."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import streamlit as st

from models.loading.conversion import prepare_default_decoder
from models.loading.decoder import DEFAULT_DECODER
from models.errors import ModelLoadError, UnsupportedModelType
from models.limits import MAX_SEED, MAX_TEXT_CHARS, MODEL_NAME_CHARS
from models.loading.pretrained import DEFAULT_MODEL, LoadedModel
from models.hooks.record import AttentionRecord
from models.loading import kinds
from models.loading.kinds import DECODER, DECODER_NAMES, PRETRAINED, default_kind
from models.loading.source import LoadedSource, ModelSource, kind_of_embedded
from models.hooks.streaming import long_limit
from models.hooks.trace import Trace
from ui import cache, charts
from ui.text import plain

DEFAULT_TEXT = "Time flies like an arrow."
MODEL_NAME = "model_name"  # session key: the pretrained encoder in use
DECODER_NAME = "decoder_name"  # session key: the pretrained causal decoder in use
LOAD_MESSAGE = "model_load_message"
LOADED_NAMES = "loaded_model_names"  # session key: the names this session loaded with the sidebar
MODEL_INPUT = "sb_model_input"  # the sidebar's box for another model's id or folder
OFFERED = "model_offered"  # session key: a model a link named and this session has not loaded
CORRECTED = "corrected_keys"  # session key: index pickers that moved an impossible value this run
# The sidebar's widgets that hold a value (its buttons hold none): ui.links sends a value again
# when the browser lacks its widget (ui/links.py). "sb_read_all" is ui.attention.READ_ALL.
SIDEBAR_VALUES = ("sb_text", "sb_pair", "sb_kind", "sb_seed", "sb_read_all", "sb_merge_words",
                  "sb_hide_special", MODEL_INPUT, charts.PRESENTER, charts.PALETTE_SAFE,
                  charts.FIGURE_FORMAT)
# Presenter mode: larger, darker text, less padding above the page, for a 1280 x 720 projector
PRESENTER_CSS = """<style>
html { font-size: 18px; }
.stApp, .stApp p, .stApp li, .stApp label, .stApp [data-testid="stMarkdownContainer"] {
  color: #111111 !important;
}
.stApp h1 { font-size: 2.1rem !important; padding: 0 0 0.5rem 0 !important; color: #111111; }
.stApp [data-testid="stCaptionContainer"] { font-size: 1rem !important; color: #333333 !important; }
.stApp [data-testid="stExpander"] summary p { font-size: 1rem !important; }
.stMainBlockContainer, .block-container { padding-top: 3.5rem !important; padding-bottom: 1rem; }
</style>"""

@dataclass(frozen=True)
class ModelOffer:
    """A model a link named that this session has not loaded: the sidebar asks "Load <name>?"
    (a link never loads a model by itself)."""

    kind: str
    name: str


def _load_offered() -> None:
    """Button callback: load the model a link named, as the kind the link gave it."""
    offer = st.session_state.pop(OFFERED, None)
    if offer is None:
        return
    try:
        cache.named(offer.kind, offer.name)
    except (ModelLoadError, ValueError) as error:
        st.session_state[LOAD_MESSAGE] = ("error", str(error))
        return
    st.session_state[name_slot(offer.kind)] = offer.name
    st.session_state["sb_kind"] = offer.kind
    st.session_state.setdefault(LOADED_NAMES, set()).add(offer.name)
    st.session_state[LOAD_MESSAGE] = ("success", f"Loaded '{offer.name}'.")


def _load_other_model() -> None:
    """Button callback: switch models only when the new one loads (an encoder, else a decoder)."""
    st.session_state.pop(OFFERED, None)
    name = st.session_state.get(MODEL_INPUT, "").strip()
    try:
        kind = kind_of_embedded(name)  # the page run converts it (once) with progress
        if kind is None:
            cache.pretrained(name)
            kind = PRETRAINED
    except UnsupportedModelType:
        try:
            cache.decoder(name)
            kind = DECODER
        except ModelLoadError as error:
            st.session_state[LOAD_MESSAGE] = ("error", str(error))
            return
    except ModelLoadError as error:
        st.session_state[LOAD_MESSAGE] = ("error", str(error))
        return
    st.session_state[name_slot(kind.value)] = name
    st.session_state["sb_kind"] = kind.value
    st.session_state.setdefault(LOADED_NAMES, set()).add(name)
    st.session_state[LOAD_MESSAGE] = ("success", f"Loaded '{name}'.")


def name_slot(kind: str) -> str:
    """The session key of the model name a kind reads: the sidebar's decoder or its encoder."""
    return DECODER_NAME if kinds.spec(kind).names == DECODER_NAMES else MODEL_NAME


def sidebar_name(kind: str) -> str:
    """The model name the sidebar gives a kind (the one this session loaded, or the built-in)."""
    return st.session_state.get(name_slot(kind)) or kinds.spec(kind).default_name


def sidebar_source(kind: str, seed: int = 0) -> ModelSource:
    """The model of `kind` the sidebar would run: its name for that kind, and the seed."""
    return ModelSource(kind, sidebar_name(kind), seed)


def sidebar(after_model=None) -> None:
    """Render the shared inputs. Values persist across pages because app.py renders them.
    `after_model()` draws more settings of the input under the model's (ui.attention's)."""
    st.session_state.setdefault(MODEL_NAME, DEFAULT_MODEL)
    st.session_state.setdefault(DECODER_NAME, DEFAULT_DECODER)
    # Defaults live in the session, not in the widgets, so that a link may set them first.
    st.session_state.setdefault("sb_text", DEFAULT_TEXT)
    st.session_state.setdefault("sb_seed", 0)
    with st.sidebar:
        st.text_area("Sentence", key="sb_text", height=90,
                     max_chars=MAX_TEXT_CHARS,
                     help="Any text; longer than the model's limit is truncated with a notice.")
        st.text_input("Second sentence (optional, makes a pair)", key="sb_pair",
                      max_chars=MAX_TEXT_CHARS,
                      placeholder="e.g. Fruit flies like a banana.")
        st.radio("Model", [kind.value for kind in kinds.offered()],
                 format_func=lambda value: kinds.spec(value).title, key="sb_kind")
        chosen = kinds.spec(st.session_state.sb_kind)
        if chosen.uses_seed:
            st.number_input("Seed", min_value=0, max_value=MAX_SEED, step=1, key="sb_seed")
        st.text(chosen.caption(sidebar_source(chosen.value)))
        if after_model is not None:
            after_model()
        st.toggle("Merge word pieces into words", key="sb_merge_words",
                  help="A word's row is the mean of its pieces' rows; its column the sum of "
                       "its pieces' columns, so rows still add up to 1.")
        st.toggle("Hide special tokens", key="sb_hide_special",
                  help="Drops [CLS], [SEP] and the like; every row is renormalised to 1.")
        offer = st.session_state.get(OFFERED)
        with st.expander("Use another pretrained model", expanded=offer is not None):
            st.text_input("Hugging Face model id or local folder", key=MODEL_INPUT,
                          max_chars=MODEL_NAME_CHARS,
                          placeholder="bert-base-uncased, gpt2 or /path/to/folder")
            if offer is not None:
                st.button(f"Load {plain(offer.name)}?", key="sb_model_offer", on_click=_load_offered,
                          type="primary", help="The link you opened names this model; it is "
                                               "loaded only when you ask.")
            st.button("Load", key="sb_model_load", on_click=_load_other_model)
            st.caption("Only .safetensors weights are read and no remote code runs. "
                       + cache.kept_models_notice())
            message = st.session_state.get(LOAD_MESSAGE)
            if message:
                (st.error if message[0] == "error" else st.success)(plain(message[1]))
        _presenter_section()


def fold_sidebar_when_presenting() -> None:
    """Presenter mode folds the sidebar away: a link with `present=true` opens without it, and
    turning the mode on closes it, so the page takes the projector's whole width. Streamlit
    applies the setting only when it changes between runs, so a lecturer who opens the sidebar
    again while presenting keeps it open."""
    presenting = bool(st.session_state.get(charts.PRESENTER))
    st.set_page_config(initial_sidebar_state="collapsed" if presenting else "auto")


def _presenter_section() -> None:
    """Presenter mode (large dark text), colour-blind-safe colours, the figure download format."""
    st.subheader("Presenter", divider="gray")
    st.toggle("Presenter mode", key=charts.PRESENTER,
              help="Large, dark text in the page and every figure, for a projector.")
    st.toggle("Colour-blind-safe colours", key=charts.PALETTE_SAFE,
              help="Cividis and purple–orange colour scales, Okabe–Ito colours for lines and "
                   "bars.")
    st.radio("Download figures as", charts.FORMATS, key=charts.FIGURE_FORMAT, horizontal=True,
             help="The camera button above each figure saves it in this format.")
    if st.session_state.get(charts.PRESENTER):
        st.html(PRESENTER_CSS)  # styles only: Streamlit puts it where it takes no space


@dataclass(frozen=True)
class SidebarInput:
    """What the sidebar asks for: the text, the model, and the token options."""

    text: str
    pair: str
    source: ModelSource
    encoder_name: str
    decoder_name: str
    merge_words: bool
    hide_special: bool


def _capped(text: str) -> str:
    """At most MAX_TEXT_CHARS characters, cut before any tokenizer sees the text."""
    return text[:MAX_TEXT_CHARS]


def sidebar_input() -> SidebarInput:
    state = st.session_state
    encoder_name = state.get(MODEL_NAME, DEFAULT_MODEL)
    decoder_name = state.get(DECODER_NAME, DEFAULT_DECODER)
    return SidebarInput(
        text=_capped(state.get("sb_text", DEFAULT_TEXT) or ""),
        pair=_capped((state.get("sb_pair") or "").strip()),
        source=sidebar_source(state.get("sb_kind", default_kind().value),
                              int(state.get("sb_seed", 0))),
        encoder_name=encoder_name,
        decoder_name=decoder_name,
        merge_words=bool(state.get("sb_merge_words")),
        hide_special=bool(state.get("sb_hide_special")),
    )


def use_decoder() -> None:
    """Button callback: switch the sidebar's model to the causal decoder."""
    st.session_state["sb_kind"] = DECODER.value


def loaded_source(source: ModelSource) -> LoadedSource:
    """The loaded model for `source`, converting the embedded decoder first with progress."""
    _prepare_embedded(source.name)
    return cache.loaded(source)


def current_trace() -> Trace | None:
    """The trace for the sidebar's input, or None after telling the user why there is none."""
    given = sidebar_input()
    if not given.text.strip():
        st.info("Type a sentence in the sidebar to see its attention.")
        return None
    try:
        runner = loaded_source(given.source)
        result = cache.trace(given.source, given.text, given.pair)
    except (ModelLoadError, ValueError) as error:
        st.error(plain(str(error)))
        return None
    if len(st.session_state.get("sb_text") or "") > MAX_TEXT_CHARS:
        st.warning(f"Only the first {MAX_TEXT_CHARS:,} characters of the text are used.")
    if result.record.dropped_tokens:
        further = (" The pages that explore a model (maps, all heads, predictions, bertviz, one "
                   "row, statistics, rollout, compare, head finder and detectors) can read up "
                   f"to {long_limit(runner):,} tokens, layer by layer."
                   if long_limit(runner) > runner.max_tokens else "")
        st.warning(runner.limit_notice(result.record.dropped_tokens) + further)
    if given.source.spec.reproduces is not None:
        difference = cache.copied_difference(given.source, given.text, given.pair)
        st.success(
            f"With the weights copied in, the from-scratch encoder reproduces "
            f"{given.source.name}: the largest difference from its attention, over all "
            f"{result.record.num_layers} × {result.record.num_heads} heads of this input, is "
            f"{difference:.1e}."
        )
    return result


def current_record(apply_options: bool = True) -> AttentionRecord | None:
    """The record for the sidebar's input, or None after telling the user why there is none.

    With `apply_options`, the sidebar's token options (merge word pieces, hide special tokens)
    are applied; views whose numbers only exist per model token pass False.
    """
    result = current_trace()
    if result is None:
        return None
    given = sidebar_input()
    if not apply_options or not (given.merge_words or given.hide_special):
        return result.record
    view = cache.token_view(given.source, given.text, given.pair, given.merge_words,
                            given.hide_special)
    for note in view.notes:
        st.caption(note)
    return view.record


def decoder_with_progress(name: str) -> LoadedModel:
    """The cached decoder; the first use on a machine converts the embedded SmolLM2 (~20 s)
    and shows its progress."""
    _prepare_embedded(name)
    return cache.decoder(name)


def _prepare_embedded(name: str) -> None:
    """The first use of the embedded SmolLM2 on a machine converts it (~20 s), with progress."""
    if name == DEFAULT_DECODER:
        bar = st.progress(0.0, text="Preparing SmolLM2 (once per machine, about 20 s)…")
        try:
            prepare_default_decoder(lambda fraction, message: bar.progress(fraction, text=message))
        finally:
            bar.empty()


def index_slider(label: str, count: int, key: str, container=st) -> int:
    """A 0-based index picker that stays valid when the input, model or link changes: an index
    that does not exist moves to the nearest one that does, with a note."""
    value = st.session_state.get(key)
    number = isinstance(value, numbers.Real) and not isinstance(value, bool)
    valid = isinstance(value, numbers.Integral) and number and 0 <= value < count
    if value is not None and not valid:
        chosen = max(0, min(int(value), count - 1)) if number and math.isfinite(value) else 0
        st.session_state[key] = chosen
        st.session_state.setdefault(CORRECTED, set()).add(key)
        container.caption(f"{label} {plain(str(value))} does not exist here ({count} in all, "
                          f"0 to {count - 1}): showing {label.lower()} {chosen}.")
    if count == 1:
        container.caption(f"{label}: 0 (the only one)")
        return 0
    return container.slider(label, 0, count - 1, key=key)


def first_choice(key: str, options, default) -> None:
    """A choice widget's default, set in the session before it is drawn: `default` when the key
    holds nothing, or a value not among `options` (a new sentence's positions), as index= would.
    A range (a tuple default) must be two ends in `options`.

    Every page control takes its first value from the session like this, or with
    `st.session_state.setdefault` when its options never change, and never with value= or
    index= as well: a link, an example or a value sent again (ui/links.py) set the same key,
    and Streamlit then logs a warning with a stack trace (tests/conftest.py fails a test that
    makes it)."""
    value = st.session_state.get(key)
    if isinstance(default, tuple):  # a range: two ends (a link's single value is not one)
        ends = tuple(value) if isinstance(value, (tuple, list)) and len(value) == 2 else None
    else:
        ends = (value,)
    try:
        valid = value is not None and ends is not None and all(end in options for end in ends)
    except TypeError:  # a value that cannot be compared with the options
        valid = False
    if not valid:
        st.session_state[key] = default
