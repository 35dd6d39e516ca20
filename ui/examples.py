"""The chapters' own examples as data, and the sidebar menu that opens them with one click.

An example is a sentence (and maybe a second one), a model kind, a page and that page's controls.
Most open through a real link (`st.page_link` with the view's query, the format of ui/links.py),
so a teacher can also copy it onto a slide. An example about one head ("the head that links 'he'
to 'Mario'") cannot name the head in advance: which head does that depends on the model. Its
button runs the head finder (models/analysis/head_finder.py) on the running model's trace of the
sentence when it is clicked, and opens the head it ranks first on the attention-maps page.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from models.errors import ModelLoadError
from models.analysis.head_finder import every_position, locate, query_to_keys
from models.hooks.record import AttentionRecord
from models.loading.kinds import DECODER, PRETRAINED
from models.loading.source import ModelSource
from ui import cache
from ui.link_codec import model_param
from ui.link_controls import PAGES
from ui.links import link_text, page_controls, shared_params
from ui.state import loaded_source, sidebar_input, sidebar_source
from ui.text import plain

MAPS = "attention_maps"
REQUEST = "examples_open"  # session key: (page file, query) a head button asked to open
MESSAGE = "examples_message"  # session key: why the last head button could not open its head

CHAPTERS = {
    0: "Transformers from first principles",
    1: "Meet the Transformers",
    2: "Attention, generally, and transfer learning",
    3: "The Transformer, step by step",
    4: "Self-attention exercises and BERT",
}


@dataclass(frozen=True)
class HeadQuestion:
    """Which head sends the query word's attention to the key words (found on the running model)."""

    query: str
    keys: tuple[str, ...]


@dataclass(frozen=True)
class Example:
    """One example of a chapter, as the view that shows it.

    model: the sidebar's model kind the example needs, or None to keep the sidebar's model.
    controls: (widget key, value) pairs of the page's own controls.
    """

    key: str
    title: str
    chapter: int
    theme: str
    text: str
    page: str
    note: str
    pair: str = ""
    model: str | None = PRETRAINED.value  # the kind it runs on (None: the sidebar's model)
    controls: tuple[tuple[str, object], ...] = ()
    head: HeadQuestion | None = None

    @property
    def page_file(self) -> str:
        return f"pages/{self.page}.py"


MARIO = "Mario is short, but he can jump super high."
CAPITAL = "The capital of France is"
# Indirect-object identification (Wang et al. 2022): the clean prompt's answer is the name that
# did not give the drink; with a third name as the giver, nothing tells the two apart.
IOI_CLEAN = "When Mary and John went to the store, John gave a drink to"
IOI_CORRUPTED = "When Mary and John went to the store, Paul gave a drink to"
IOI_ANSWER, IOI_WRONG = "Mary", "John"
# Factual recall (Meng et al. 2022): the same sentence about another landmark, as many tokens.
FACT_CLEAN = "The Eiffel Tower is in the city of"
FACT_CORRUPTED = "The Colosseum is in the city of"
FACT_ANSWER, FACT_WRONG = "Paris", "Rome"

EXAMPLES: tuple[Example, ...] = (
    Example("dot_10", "Dot products of random vectors, d = 10", 0, "Why scale",
            "Time flies like an arrow.", "scaling",
            "The chapter's experiment: the mean size of q·k for 10-dimensional random vectors.",
            controls=(("scaling_dk", 10),)),
    Example("dot_10000", "The same at d = 10,000", 0, "Why scale",
            "Time flies like an arrow.", "scaling",
            "A thousand times more dimensions: the dot products are about √1000 ≈ 32 times "
            "larger.", controls=(("scaling_dk", 10_000),)),
    Example("mario", "“he” → “Mario”: find the head", 0, "Attention from scratch", MARIO,
            MAPS, "Runs the head finder on your model and opens the head that sends most of "
                  "'he' to 'Mario'.", model=None, head=HeadQuestion("he", ("Mario",))),
    Example("gym", "“where” → “gym”: a head for places", 0, "Multi-head attention",
            "Mario went to the flower store and then to the gym, where he did 50 squats.", MAPS,
            "Another relation another head may track: where the character went.", model=None,
            head=HeadQuestion("where", ("gym",))),
    Example("span", "A head that looks 5 tokens back", 0, "Adaptive span",
            "Mario went to the flower store and then to the gym, where he did 50 squats.",
            "adaptive_span", "The chapter's span of 5: keys further back fade out over the ramp.",
            controls=(("span_z", 5.0), ("span_form", "causal"))),
    Example("sentiment", "Fine-tuning for sentiment", 0, "Fine-tuning",
            "I like natural language processing.", "fine_tuning",
            "The chapter's sentiment classifier, trained here on positive and negative "
            "sentences."),
    Example("time_flies", "“Time flies like an arrow.”", 1, "Attention from scratch",
            "Time flies like an arrow.", MAPS, "The chapter's sentence in a pretrained BERT."),
    Example("fruit_flies", "Time flies / fruit flies: which heads differ?", 1,
            "Multi-head attention", "Time flies like an arrow.", "compare",
            "'flies' is a verb in one and a noun in the other.",
            pair="Fruit flies like a banana."),
    Example("head_view", "The pair in bertviz's head view", 1, "Multi-head attention",
            "time flies like an arrow", "bertviz_views",
            "Both sentences as one pair, as the chapter draws them.",
            pair="fruit flies like a banana", controls=(("bertviz_view", "head"),)),
    Example("causal", "The decoder's mask on “Time flies like an arrow.”", 1, "Masks",
            "Time flies like an arrow.", "causal_masks",
            "A lower-triangular mask: each token sees itself and what came before.",
            controls=(("masks_steps_of", "causal"),)),
    Example("fish_bank", "“bank” next to “fish” and “swam”", 2, "Attention from scratch",
            "The fish swam near the bank.", MAPS,
            "Which head lets 'bank' read the words that say it is a river bank?", model=None,
            head=HeadQuestion("bank", ("fish", "swam"))),
    Example("thinking", "Scoring “Thinking” against “Machines”", 3, "Attention from scratch",
            "Thinking Machines", "row_arithmetic",
            "One query row: q·k, divided by √d_k, then the softmax."),
    Example("tomato", "“it” → “tomato basil”", 3, "Attention from scratch",
            "Tomato basil is my favorite starter because it is surprisingly filling.", MAPS,
            "A pronoun and the two words it stands for.", model=None,
            head=HeadQuestion("it", ("tomato", "basil"))),
    Example("animal", "“it” → “animal”", 3, "Attention from scratch",
            "The animal didn't cross the street because it was too tired.", MAPS,
            "Which head resolves 'it' to 'animal'?", model=None,
            head=HeadQuestion("it", ("animal",))),
    Example("translate", "Translating into French (je vois la voiture rouge)", 3,
            "Encoder–decoder", "i see the red car", "cross_attention",
            "The toy translator's cross-attention: each French word reads the English source.",
            controls=(("xattn_model", "toy"), ("xattn_source", "i see the red car"))),
    Example("capital", "“The capital of France is”: the next word", 3, "Encoder–decoder",
            CAPITAL, "predictions", "The decoder's top candidates for the next token.",
            model=DECODER.value),
    Example("generate", "“The capital of France is”, written token by token", 3,
            "Encoder–decoder", CAPITAL, "generation",
            "Greedy generation with the decoder, one attention row per step.",
            model=DECODER.value),
    Example("ioi_patching", "“…John gave a drink to”: patch each head back", 3,
            "Causal interventions", IOI_CLEAN, "activation_patching",
            "Indirect-object identification: which heads bring 'Mary' back when patched from "
            "the clean prompt into one with a third name?", model=DECODER.value,
            controls=(("patch_clean", IOI_CLEAN), ("patch_corrupted", IOI_CORRUPTED),
                      ("patch_answer", IOI_ANSWER), ("patch_wrong", IOI_WRONG),
                      ("patch_site", "head"))),
    Example("ioi_attribution", "Which heads write “Mary”? Direct logit attribution", 3,
            "Causal interventions", IOI_CLEAN, "logit_attribution",
            "Each head's and each MLP's direct share of logit(Mary) − logit(John).",
            model=DECODER.value, controls=(("dla_answer", IOI_ANSWER), ("dla_wrong", IOI_WRONG))),
    Example("fact_patching", "Eiffel Tower or Colosseum: where does “Paris” come from?", 3,
            "Causal interventions", FACT_CLEAN, "activation_patching",
            "Factual recall: patch the residual stream, layer by position, from the Eiffel Tower "
            "prompt into the Colosseum one.", model=DECODER.value,
            controls=(("patch_clean", FACT_CLEAN), ("patch_corrupted", FACT_CORRUPTED),
                      ("patch_answer", FACT_ANSWER), ("patch_wrong", FACT_WRONG),
                      ("patch_site", "resid_pre"))),
    Example("fact_lens", "“The Eiffel Tower is in the city of”: the logit lens", 3,
            "Causal interventions", FACT_CLEAN, "logit_lens",
            "What each layer would predict if the model stopped there: when does 'Paris' "
            "appear?", model=DECODER.value, controls=(("lens_token", FACT_ANSWER),)),
    Example("bank_deposit", "“I made a bank deposit”: both directions", 4, "Masks",
            "I made a bank deposit.", "causal_masks",
            "A bidirectional encoder lets 'bank' read 'deposit'; a causal one cannot.",
            controls=(("masks_steps_of", "bidirectional"),)),
    Example("padding", "Padding two sentences into one batch", 4, "Masks",
            "I love Paris.", "causal_masks",
            "The attention mask hides the [PAD] keys of the shorter sentence.",
            controls=(("masks_first", "I love Paris."),
                      ("masks_second", "The man went to the store. He bought a gallon of milk."))),
)

BY_KEY = {example.key: example for example in EXAMPLES}


def link_params(example: Example) -> dict[str, str]:
    """The query of the view the example opens: the sidebar's part (its token options kept),
    the example's sentence and model, and the page's controls under their link names."""
    params = shared_params()
    params["text"] = example.text
    params.pop("pair", None)
    if example.pair:
        params["pair"] = example.pair
    if example.model is not None:
        params.pop("model", None)
        params.pop("seed", None)
        model = model_param(example.model)  # the model of that kind this session uses
        if model is not None:
            params["model"] = model
    controls = page_controls(PAGES / f"{example.page}.py")
    for key, value in example.controls:
        params[controls.name_of(key)] = link_text(value)
    return params


def example_source(example: Example) -> ModelSource:
    """The model the example runs on: its own kind, or the sidebar's model."""
    if example.model is None:
        return sidebar_input().source
    return sidebar_source(example.model)


def ranked_head(record: AttentionRecord, question: HeadQuestion) -> tuple[int, int, float]:
    """The head finder's first head: (layer, head, share of the query's attention on the keys)."""
    query = locate(record, question.query)
    keys = every_position(record, question.keys)
    scores = query_to_keys(record, query.positions, keys)  # (L, H)
    layer, head = np.unravel_index(int(np.argmax(scores)), scores.shape)
    return int(layer), int(head), float(scores[layer, head])


def _open_head(key: str) -> None:
    """Button callback: find the example's head on the running model, then ask to open it."""
    example = BY_KEY[key]
    given = sidebar_input()
    source = example_source(example)
    st.session_state.pop(MESSAGE, None)
    try:
        loaded_source(source)
        cache.trace(source, example.text, example.pair)
        record = cache.token_view(source, example.text, example.pair, given.merge_words,
                                  given.hide_special).record
        layer, head, _ = ranked_head(record, example.head)
    except (ModelLoadError, ValueError) as error:
        st.session_state[MESSAGE] = str(error)
        return
    st.session_state[REQUEST] = (example.page_file, {**link_params(example),
                                                     "layer": str(layer), "head": str(head)})


def examples_menu() -> None:
    """The sidebar's menu of the chapters' examples (call right after the sidebar)."""
    request = st.session_state.pop(REQUEST, None)
    if request is not None:  # a head button's callback found the head (callbacks cannot switch)
        page_file, query = request
        st.switch_page(page_file, query_params=query)
    with st.sidebar, st.popover("Examples from the chapters", icon=":material/menu_book:",
                                width="stretch"):
        st.caption("One click sets the sentence, the model and the page. The examples marked "
                   "with a magnifier find their head on the model you are using when you click "
                   "them.")
        for chapter, title in CHAPTERS.items():
            st.markdown(f"**Chapter {chapter}: {title}**")
            for example in (e for e in EXAMPLES if e.chapter == chapter):
                if example.head is not None:
                    st.button(example.title, key=f"examples_{example.key}",
                              icon=":material/search:", help=example.note,
                              on_click=_open_head, args=(example.key,), type="tertiary")
                else:
                    st.page_link(example.page_file, label=example.title, help=example.note,
                                 query_params=link_params(example))
        message = st.session_state.get(MESSAGE)
        if message:
            st.warning(plain(message))
