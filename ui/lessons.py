"""Guided lessons, one per theme of the chapters: short steps on the user's own sentence.

Content is plain data: a lesson is a list of steps; a step has a title, two or three sentences,
one live figure, a "try this" action and a check question. Figures are drawn from the app's
caches (the sidebar's trace, the teaching caches, the toy translator and fine-tuned models that
are already on this server); a step never starts a training run itself, it offers the page
that does. Progress (steps done, questions answered right) lives in the session.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import streamlit as st

from models.adaptive_span import apply_span, ramp_curve
from models.arithmetic import RowArithmetic, row_arithmetic
from models.errors import ModelLoadError
from models.finetune import DEFAULT_EPOCHS, PRETRAINED, default_settings
from models.head_analysis import TokenNotFound, every_position, locate, query_to_keys
from models.labelled_data import load_shipped
from models.scaling import entropy_bits, softmax
from models.source import Kind
from models.span_training import load_learned_spans
from models.translation_task import EXAMPLE_SENTENCES
from ui import charts, finetune_cache, seq2seq_cache, teaching_cache as teach
from ui.examples import BY_KEY, MARIO, link_params
from ui.links import shared_params
from ui.state import current_record, current_trace, sidebar_input
from ui.text import plain
from viz.arithmetic import row_steps_figure
from viz.head_analysis import layer_head_map
from viz.heatmap import attention_heatmap, layer_heads_grid
from viz.masks import mask_steps_figures, side_by_side
from viz.scaling import dot_product_figure, softmax_bars_figure
from viz.span import before_after_heatmaps, learned_spans_figure, ramp_figure
from viz.training import change_heatmap, data_figure, head_changes, probabilities_figure

PROGRESS = "lessons_progress"  # session key: {"done": set, "right": set, "answers": dict}
FLAG = "lessons_flag_"  # session keys of the lessons' on/off "try this" switches
STEP_KEY = "lessons_step"
SPAN, RAMP = 5.0, 2.0  # the chapter's span of 5 tokens, with a ramp of 2
PADDED_WITH = "I love Paris."  # the short sentence batched with the user's


# --- content types ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Choice:
    text: str
    right: bool
    why: str  # one or two sentences: why this answer is right or wrong


@dataclass(frozen=True)
class Question:
    prompt: str
    choices: tuple[Choice, ...]

    def __post_init__(self) -> None:
        if sum(choice.right for choice in self.choices) != 1:
            raise ValueError(f"'{self.prompt}' needs exactly one right answer")

    @property
    def right_index(self) -> int:
        return next(i for i, choice in enumerate(self.choices) if choice.right)


@dataclass(frozen=True)
class SetSidebar:
    """Try this: a button that changes the sidebar's sentence or model."""

    label: str
    text: str | None = None
    kind: Kind | None = None


@dataclass(frozen=True)
class ToggleModel:
    """Try this: a button that switches the sidebar between the encoder and the decoder."""


@dataclass(frozen=True)
class Switch:
    """Try this: a button that turns one of the lesson's own switches on or off."""

    name: str
    turn_on: str
    turn_off: str


@dataclass(frozen=True)
class OpenExample:
    """Try this: a link that opens one of the chapters' examples (ui/examples.py)."""

    example: str
    label: str


Action = SetSidebar | ToggleModel | Switch | OpenExample


@dataclass(frozen=True)
class Step:
    title: str
    text: str
    figure: Callable[[str], None]  # draws the step's figure; its argument is the chart's key
    action: Action
    question: Question


@dataclass(frozen=True)
class Lesson:
    key: str
    title: str
    chapters: str
    steps: tuple[Step, ...] = field(default_factory=tuple)


# --- figures: each draws one live figure from the caches ----------------------------------------

def _show(figure, key: str) -> None:
    charts.show(figure, key)


def _flag(name: str) -> bool:
    return bool(st.session_state.get(FLAG + name))


def _first_word(tokens: tuple[str, ...]) -> int:
    """The query a step looks at: the first token after a leading special token, if any."""
    return min(1, len(tokens) - 1)


def _sentence_row() -> tuple[RowArithmetic, tuple[str, ...], str] | None:
    trace = current_trace()
    if trace is None:
        return None
    record = trace.record
    query = _first_word(record.tokens)
    caption = (f"Layer 0 · head 0 · query #{query} '{record.tokens[query]}' · "
               f"d_k = {trace.query.shape[-1]} · {record.source}")
    return row_arithmetic(trace, 0, 0, query), record.tokens, caption


def row_figure(key: str) -> None:
    found = _sentence_row()
    if found is not None:
        row, tokens, caption = found
        _show(row_steps_figure(row, tokens), key)
        st.caption(plain(caption))


def head_map_figure(key: str) -> None:
    record = current_record()
    if record is not None:
        _show(attention_heatmap(record, 0, 0), key)
        st.caption(plain(f"Layer 0 · head 0 · {record.num_tokens} tokens · {record.source}"))


def layer_grid_figure(key: str) -> None:
    record = current_record()
    if record is not None:
        _show(layer_heads_grid(record, 0), key)
        st.caption(plain(f"Every head of layer 0 · {record.source}"))


def pronoun_figure(key: str) -> None:
    record = current_record()
    if record is None:
        return
    try:
        query = locate(record, "he")
        keys = every_position(record, ("Mario",))
    except TokenNotFound:
        st.info("Your sentence has no 'he' and 'Mario' to link. Press the button below to use "
                "the chapter's sentence.")
        return
    scores = query_to_keys(record, query.positions, keys)  # (L, H)
    layer, head = np.unravel_index(int(np.argmax(scores)), scores.shape)
    _show(layer_head_map(scores, "Share of the attention of 'he' on 'Mario', per head",
                         "attention"),
          key)
    st.caption(plain(f"The head finder ranks layer {layer} · head {head} first: it puts "
                     f"{scores[layer, head]:.0%} of the attention of 'he' on 'Mario'. "
                     f"{record.source}."))
    st.page_link("pages/attention_maps.py", label=f"Open layer {layer} · head {head}",
                 icon=":material/open_in_new:",
                 query_params={**shared_params(), "layer": str(layer), "head": str(head)})


def dot_products_figure(key: str) -> None:
    experiment = teach.dot_products(0)
    trace = current_trace()
    highlight = None
    if trace is not None:
        size = int(trace.query.shape[-1])
        yours = teach.dot_products_at(size, 0)
        highlight = (size, float(yours.mean_abs[0]))
    _show(dot_product_figure(experiment.dimensions, experiment.mean_abs, experiment.approximation,
                             samples=experiment.samples, highlight=highlight), key)
    if highlight is not None:
        st.caption(f"The marker is your model's head size, d_k = {highlight[0]}: random vectors "
                   f"that long have a mean |q·k| of {highlight[1]:.2f}.")


def unscaled_row_figure(key: str) -> None:
    found = _sentence_row()
    if found is None:
        return
    row, _, caption = found
    allowed = row.allowed
    unscaled = np.zeros_like(row.dots)
    unscaled[allowed] = softmax(row.dots[allowed])
    entropies = (float(entropy_bits(unscaled)), float(entropy_bits(row.weights)))
    _show(softmax_bars_figure(row.query.shape[-1], unscaled_scores=row.dots,
                              unscaled_weights=unscaled, scaled_scores=row.scaled,
                              scaled_weights=row.weights, entropies=entropies), key)
    st.caption(plain(f"{caption}. Key j is token #j of your sentence; the scaled weights are "
                     "the ones the model used."))


def _teaching_inputs() -> tuple[str, int, str, str]:
    given = sidebar_input()
    seed = given.source.seed if given.source.kind is Kind.SCRATCH_RANDOM else 0
    return given.encoder_name, seed, given.text, given.pair


def masked_scores_figure(key: str) -> None:
    name, seed, text, pair = _teaching_inputs()
    if not text.strip():
        st.info("Type a sentence in the sidebar to see its attention.")
        return
    causal = not _flag("bidirectional")
    try:
        steps = teach.steps(name, seed, False, causal, text, pair)
    except (ModelLoadError, ValueError) as error:
        st.error(plain(str(error)))
        return
    figures = mask_steps_figures(steps.record, steps.scores(0)[0], steps.allowed,
                                 steps.query.shape[-1], 0, 0)
    _show(figures[2], key)
    st.caption(plain(f"Step ③ of the masks page: layer 0 · head 0 of the from-scratch encoder "
                     f"({'causal' if causal else 'bidirectional'}), your sentence."))


def padding_figure(key: str) -> None:
    name, seed, text, _ = _teaching_inputs()
    if not text.strip():
        st.info("Type a sentence in the sidebar to see its attention.")
        return
    try:
        batch = teach.batch(name, seed, False, text, PADDED_WITH)
    except (ModelLoadError, ValueError) as error:
        st.error(plain(str(error)))
        return
    forget = _flag("forget")
    titles = tuple(f"{n} tokens + {batch.num_tokens - n} padding" for n in batch.lengths)
    _show(side_by_side(batch.unmasked if forget else batch.masked, 0, 0, titles), key)
    st.caption(plain(f"Your sentence batched with '{PADDED_WITH}', "
                     f"{'without' if forget else 'with'} the padding mask (layer 0 · head 0 of "
                     "the from-scratch encoder)."))


def ramp_figure_step(key: str) -> None:
    curve = ramp_curve(SPAN, RAMP, SPAN + RAMP + 4)
    _show(ramp_figure(curve.distances, curve.values, SPAN, RAMP), key)


def span_on_sentence_figure(key: str) -> None:
    record = current_record()
    if record is None:
        return
    applied = apply_span(record, SPAN, RAMP, causal=True)
    _, after = before_after_heatmaps(record, applied.record, 0, 0, SPAN, RAMP)
    _show(after, key)
    st.caption(plain(f"Layer 0 · head 0 of {record.source}, causal distances. The span removed "
                     f"{applied.mean_removed(0, 0):.0%} of this head's attention (mean over "
                     "rows) before the rows were rescaled."))


def learned_spans_step(key: str) -> None:
    try:
        result = load_learned_spans()
    except (OSError, ValueError, KeyError, TypeError):
        st.info("The shipped file of learned spans could not be read; the adaptive span page "
                "can train the model again.")
        return
    settings = result.settings
    _show(learned_spans_figure(result.span_array, settings.max_span, settings.ramp,
                               result.ablation), key)


def _translation():
    """The toy translator's run on the sidebar's sentence, or on the grammar's example sentence
    when the toy model does not know the words; None (after saying why) when it is not trained."""
    if not seq2seq_cache.toy_is_trained():
        st.info("The toy translator has not been trained on this machine yet. Open the "
                "translation page below: it trains once, in under a minute.")
        return None
    text = sidebar_input().text.strip().lower().rstrip(".")
    try:
        return seq2seq_cache.toy_translation(text), text
    except ValueError:
        return seq2seq_cache.toy_translation(EXAMPLE_SENTENCES[0]), EXAMPLE_SENTENCES[0]


def cross_attention_figure(key: str) -> None:
    found = _translation()
    if found is not None:
        run, source = found
        last = run.cross.num_layers - 1
        _show(attention_heatmap(run.cross, last, 0), key)
        st.caption(plain(f"'{source}' → '{run.text}': cross-attention, layer {last} · head 0 of "
                         "the toy translator. Rows are French positions, columns English words."))


def decoder_self_figure(key: str) -> None:
    found = _translation()
    if found is not None:
        run, source = found
        last = run.decoder.num_layers - 1
        _show(attention_heatmap(run.decoder, last, 0), key)
        st.caption(plain(f"The decoder's self-attention while writing '{run.text}' "
                         f"(layer {last} · head 0): nothing above the diagonal."))


def finetune_data_figure(key: str) -> None:
    data = load_shipped()
    _show(data_figure(data.class_names, data.split_counts(False), data.split_counts(True)), key)
    st.caption(f"{data.name}: {data.train_size} sentences to train on, {data.held_out_size} "
               "held out to measure accuracy.")


def _fine_tuned():
    """Before/after of the sidebar's sentence if this server has the fine-tuned model, else None."""
    given = sidebar_input()
    data = load_shipped()
    settings = default_settings(PRETRAINED, DEFAULT_EPOCHS)
    result = finetune_cache.cached(given.encoder_name, data, settings)
    if result is None:
        st.info("No one has fine-tuned the model on this server yet. Open the fine-tuning page "
                "below and press Train (about a minute); then come back.")
        return None
    if not given.text.strip():
        st.info("Type a sentence in the sidebar to see its prediction.")
        return None
    key = finetune_cache.training_key(given.encoder_name, data, settings)
    return finetune_cache.before_after(key, given.encoder_name, given.text, result)


def finetune_prediction_figure(key: str) -> None:
    change = _fine_tuned()
    if change is not None:
        _show(probabilities_figure(change.before, change.after), key)


def finetune_heads_figure(key: str) -> None:
    change = _fine_tuned()
    if change is not None:
        _show(change_heatmap(head_changes(change.before_record, change.after_record)), key)


# --- the lessons ------------------------------------------------------------------------------

def _q(prompt: str, *choices: tuple[str, bool, str]) -> Question:
    return Question(prompt, tuple(Choice(*choice) for choice in choices))


LESSONS: tuple[Lesson, ...] = (
    Lesson("scratch", "Attention from scratch, and many heads", "chapters 0–4", (
        Step("Queries, keys and values",
             "Every token is turned into three vectors: a query (what it is looking for), a key "
             "(what it offers) and a value (what it passes on). The query of one token is "
             "compared with every key by a dot product, and a softmax turns those scores into "
             "weights that add up to 1.",
             row_figure, SetSidebar("Use the chapter's dictionary sentence",
                                    text="Squirtle is the greatest Pokemon ever."),
             _q("What do the weights of one attention row add up to?",
                ("1", True, "The softmax divides every exponential by their sum, so a row is a "
                            "set of shares of one whole."),
                ("The number of tokens", False, "That would be true if every weight were 1; the "
                                                "softmax makes them shares that add up to 1."),
                ("It depends on d_k", False, "d_k changes how peaked the weights are, not their "
                                             "sum: the softmax always normalises to 1."))),
        Step("One head, every row",
             "Do the same for every token and you get a square map: one row per query, one "
             "column per key. The row from the previous step is one row of this map.",
             head_map_figure, ToggleModel(),
             _q("In this map, what does one row show?",
                ("How one token shares its attention over all tokens", True,
                 "Rows are queries: each row is one token's weights over every key."),
                ("How much attention one token receives", False,
                 "That is a column: how much every query gives to one key, and columns need "
                 "not add up to 1."),
                ("The token's embedding vector", False,
                 "The map holds weights between tokens, not vectors."))),
        Step("Many heads in one layer",
             "A layer runs several heads side by side, each with its own query, key and value "
             "weights, so each can learn to look for something else. Their outputs are joined "
             "and mixed by one more linear layer.",
             layer_grid_figure,
             OpenExample("fruit_flies", "Compare 'time flies' with 'fruit flies', head by head"),
             _q("Why does a layer have several heads?",
                ("Each head has its own weights, so each can track a different relation", True,
                 "Like two friends watching the same video for different things, each head "
                 "can follow its own pattern: pronouns, neighbours, punctuation…"),
                ("To average out noise between identical heads", False,
                 "Identical heads would be wasted work; their weights differ from the start."),
                ("To make the model faster", False,
                 "Several heads cost about as much as one wide head; they are there for "
                 "variety, not speed."))),
        Step("The head that resolves “he”",
             "In 'Mario is short, but he can jump super high.' a model has to work out who "
             "'he' is. The head finder scores every head by how much of the attention of "
             "'he' goes to 'Mario' on the model you are running.",
             pronoun_figure, SetSidebar("Use the chapter's Mario sentence", text=MARIO),
             _q("Which head links 'he' to 'Mario'?",
                ("It depends on the model: find it by measuring", True,
                 "Each model learns its own heads; the head finder measures it on the running "
                 "model, so the answer changes with the model."),
                ("Always layer 5, head 5", False,
                 "A number that fits one model says nothing about another: a 6-layer and a "
                 "30-layer model do not even share the same heads."),
                ("The last head of the last layer", False,
                 "Nothing forces a relation into a particular place; it is where training put "
                 "it."))),
    )),
    Lesson("scaling", "Why attention is scaled", "chapters 0, 1 and 3", (
        Step("Dot products grow with the size of the vectors",
             "A dot product adds up d_k products. For random numbers with variance 1 the sum "
             "has variance d_k, so its typical size grows like √d_k: the chapter measured "
             "about 2.7 at d = 10 and far more at d = 10,000.",
             dot_products_figure, OpenExample("dot_10000", "Open the experiment at d = 10,000"),
             _q("For random vectors of size 10,000, about how large is |q·k| on average?",
                ("About 80", True, "√(2d/π) = √(2·10,000/π) ≈ 80: the size grows like √d."),
                ("About 1", False, "That is roughly its size after dividing by √d_k, not before."),
                ("About 10,000", False, "10,000 is the variance; the typical size is its "
                                        "square root, scaled by √(2/π)."))),
        Step("Your sentence, with and without the division",
             "Here is one real row of your model: the softmax of q·k as it is, and of q·k "
             "divided by √d_k, as the model does. Unscaled, the largest score takes more of "
             "the weight and the entropy falls.",
             unscaled_row_figure, ToggleModel(),
             _q("Does dividing every score of a row by √d_k change which key gets the most "
                "weight?",
                ("No, only how peaked the weights are", True,
                 "Dividing by the same positive number keeps the order of the scores; it "
                 "shrinks the gaps, so the softmax is less extreme."),
                ("Yes, it reverses the order", False,
                 "Dividing by a positive number never swaps two scores."),
                ("Yes, it makes every weight equal", False,
                 "The weights move closer together but stay different unless the scores were "
                 "equal."))),
    )),
    Lesson("masks", "Masks: causal and padding", "chapters 1, 3 and 4", (
        Step("A decoder only looks back",
             "An encoder lets every token read the whole sentence. A decoder that writes text "
             "one token at a time may only read what is already written, so row i keeps "
             "columns 0 to i. Switch the sidebar's model and watch the upper triangle empty.",
             head_map_figure, ToggleModel(),
             _q("In a causal decoder, which keys may the fourth token (row 3) attend to?",
                ("Tokens 0 to 3", True, "Itself and everything before it: the past only."),
                ("Every token", False, "That is an encoder; a decoder must not read words it "
                                       "has not written yet."),
                ("Only token 3", False, "It may read all earlier tokens too, not just itself."))),
        Step("How the mask is applied",
             "The mask is laid over the raw scores before the softmax: allowed cells keep "
             "their score, masked ones become −∞. The softmax then gives them exactly zero "
             "weight.",
             masked_scores_figure, Switch("bidirectional", "Take the mask away",
                                          "Put the causal mask back"),
             _q("Why are masked scores set to −∞ rather than to 0?",
                ("Because e^−∞ = 0, so they get exactly zero weight", True,
                 "The softmax exponentiates every score: only −∞ becomes 0."),
                ("A score of 0 would also get zero weight", False,
                 "e^0 = 1, so a score of 0 still gets a share of the row."),
                ("To make the computation faster", False,
                 "It costs the same; it is about which keys may be read."))),
        Step("Padding: two sentences in one batch",
             "A batch is a rectangle, so the shorter sentence is filled up with [PAD] tokens. "
             "The padding mask hides those as keys, so the short sentence is read as if it "
             "were alone.",
             padding_figure, Switch("forget", "Leave the padding mask out",
                                    "Put the padding mask back"),
             _q("What does the padding mask hide?",
                ("[PAD] tokens as keys", True, "No real token may attend to padding, so the "
                                               "result does not depend on the batch."),
                ("The last real word", False, "Real words are never masked by padding."),
                ("Every token after the query", False, "That is the causal mask, a different "
                                                       "rule."))),
    )),
    Lesson("span", "Adaptive attention span", "chapter 0", (
        Step("A soft mask with a ramp",
             "Adaptive span gives each head a span z: keys within z tokens keep their weight, "
             "keys further away fade out over a ramp of width R. Because the ramp is a slope "
             "rather than a cliff, z can be learned like any other weight.",
             ramp_figure_step, OpenExample("span", "Open the span page at z = 5"),
             _q(f"With z = {SPAN:g} and R = {RAMP:g}, how much of its weight does a key 6 tokens "
                "away keep?",
                ("Half", True, "m(x) = (R + z − x)/R = (2 + 5 − 6)/2 = 0.5: it is halfway "
                               "down the ramp."),
                ("All of it", False, "Only keys within z = 5 tokens keep all their weight."),
                ("None", False, "Weight drops to 0 only from z + R = 7 tokens on."))),
        Step("A span laid over your sentence",
             "Here the span z = 5 is laid over one head of your model: weights are multiplied "
             "by the mask and each row is rescaled to add up to 1. Longer sentences lose more.",
             span_on_sentence_figure,
             SetSidebar("Use the chapter's long Mario sentence",
                        text=BY_KEY["span"].text),
             _q("After the mask, why is each row divided by what is left?",
                ("So its weights add up to 1 again", True,
                 "The mask removes some weight; rescaling shares the rest out as a whole."),
                ("To undo the mask", False, "Masked keys stay at 0; only the others grow."),
                ("To divide by √d_k", False, "That scaling happens before the softmax and has "
                                             "nothing to do with the span."))),
        Step("Spans a model learned",
             "A tiny encoder was trained with a penalty on long spans. The head that only "
             "needs the previous symbol shrank its span; reaching the first symbol kept a "
             "long one.",
             learned_spans_step, OpenExample("span", "Open the span page (retrain there)"),
             _q("What pushes a head's span down during training?",
                ("A small penalty on z added to the loss", True,
                 "Every head pays for its span, so it keeps a long one only if the task needs "
                 "it."),
                ("The softmax", False, "The softmax does not know about distances."),
                ("Nothing: spans only grow", False, "Without the penalty they could stay long; "
                                                    "with it they shrink where they can."))),
    )),
    Lesson("seq2seq", "Encoder–decoder: translating", "chapters 1 and 3", (
        Step("Cross-attention reads the source",
             "An encoder–decoder has three kinds of attention: the encoder's self-attention, "
             "the decoder's masked self-attention, and cross-attention. In cross-attention the "
             "queries come from the decoder and the keys and values from the encoder, so each "
             "word being written reads the source sentence.",
             cross_attention_figure,
             SetSidebar("Use a sentence the toy translator knows", text="i see the red car"),
             _q("In cross-attention, where do the queries come from?",
                ("The decoder", True, "The word being written asks; the encoded source "
                                      "answers with its keys and values."),
                ("The encoder", False, "The encoder provides the keys and values."),
                ("Both, averaged", False, "Queries and keys come from different stacks; "
                                          "that is what makes it cross-attention."))),
        Step("The decoder writes one word at a time",
             "While writing, the decoder reads only the words it has already written: its "
             "self-attention is causal. A decoder-only model such as the one in the sidebar "
             "works the same way, without a source.",
             decoder_self_figure, OpenExample("generate", "Watch the decoder write"),
             _q("Why is the decoder's self-attention causal?",
                ("Later words are not written yet", True,
                 "At each step the future does not exist; in training the mask keeps the model "
                 "from copying the answer."),
                ("To save memory", False, "The mask is a rule about what may be read, not a "
                                          "saving."),
                ("Because French is read right to left", False,
                 "French is written left to right like English."))),
    )),
    Lesson("finetune", "Fine-tuning a classifier", "chapters 0, 2 and 4", (
        Step("Labelled sentences",
             "Fine-tuning adds a small classification head to a pretrained encoder and trains "
             "both on labelled sentences. Part of the sentences are held out to measure how "
             "well it works on text it has not seen.",
             finetune_data_figure,
             SetSidebar("Use the chapter's sentence", text="I like natural language processing."),
             _q("What does fine-tuning train?",
                ("The new head and, a little, every weight of the encoder", True,
                 "The whole model learns together; the pretrained weights move only a little."),
                ("Only the encoder's attention", False, "Every weight changes, and the new "
                                                        "head most of all."),
                ("Nothing in the encoder", False, "That would be a frozen encoder; here the "
                                                  "encoder is trained too."))),
        Step("Your sentence, before and after",
             "Before training, the new head has random weights, so its answer is a guess. "
             "After fine-tuning, your sentence gets the label the model learned for it, "
             "usually with far more confidence.",
             finetune_prediction_figure, OpenExample("sentiment", "Open the fine-tuning page"),
             _q("Why does a pretrained encoder learn this from a few hundred sentences?",
                ("It already knows how words relate", True,
                 "Pretraining taught it that 'lovely' and 'wonderful' are close; fine-tuning "
                 "only points that knowledge at the task."),
                ("A few hundred sentences are plenty for any model", False,
                 "The from-scratch encoder, trained on the same sentences, stays near chance."),
                ("The held-out sentences are in the training set", False,
                 "They are kept apart precisely to test on unseen text."))),
        Step("Which heads changed",
             "Fine-tuning moves every weight a little, so attention changes too. The map ranks "
             "the heads by how differently they attend to your sentence after training.",
             finetune_heads_figure, OpenExample("sentiment", "Open the fine-tuning page"),
             _q("How does fine-tuning change the attention heads?",
                ("Some more than others", True, "Heads the task uses move more; many barely "
                                                "change."),
                ("It resets them", False, "It starts from the pretrained weights and nudges "
                                          "them."),
                ("It leaves them untouched", False, "Every weight gets gradients, the "
                                                    "attention weights included."))),
    )),
)

BY_LESSON = {lesson.key: lesson for lesson in LESSONS}


# --- progress -------------------------------------------------------------------------------

def progress() -> dict:
    """This session's progress: steps done and questions answered right, as (lesson, step)."""
    return st.session_state.setdefault(PROGRESS, {"done": set(), "right": set(), "answers": {}})


def lesson_label(key: str) -> str:
    lesson = BY_LESSON[key]
    done = sum((key, n) in progress()["done"] for n in range(1, len(lesson.steps) + 1))
    mark = " ✓" if done == len(lesson.steps) else ""
    return f"{lesson.title} ({lesson.chapters}){mark}"


def valid_step(lesson: str) -> None:
    """Before the step picker: a step the lesson does not have moves to step 1 (the link
    then says so)."""
    count = len(BY_LESSON[lesson].steps)
    if st.session_state.get(STEP_KEY) not in range(1, count + 1):
        st.session_state[STEP_KEY] = 1


def restart_lesson() -> None:
    """The lesson picker's callback: a new lesson starts at step 1."""
    st.session_state[STEP_KEY] = 1


def step_label(lesson: str) -> Callable[[int], str]:
    steps = BY_LESSON[lesson].steps
    done = progress()["done"]
    return lambda number: (f"{number}. {steps[number - 1].title}"
                           + (" ✓" if (lesson, number) in done else ""))


def _move(lesson: str, number: int, by: int) -> None:
    """Previous (by = -1), next (1) or finish (0); moving on or finishing marks the step done."""
    if by >= 0:
        progress()["done"].add((lesson, number))
    st.session_state[STEP_KEY] = number + by


def _answered(lesson: str, number: int, key: str) -> None:
    choice = st.session_state.get(key)
    if choice is None:
        return
    state = progress()
    state["answers"][(lesson, number)] = choice
    question = BY_LESSON[lesson].steps[number - 1].question
    if choice == question.right_index:
        state["right"].add((lesson, number))
        state["done"].add((lesson, number))
    else:
        state["right"].discard((lesson, number))


def _set_sidebar(text: str | None, kind: Kind | None) -> None:
    if text is not None:
        st.session_state["sb_text"] = text
        st.session_state["sb_pair"] = ""
    if kind is not None:
        st.session_state["sb_kind"] = kind.value


def _toggle_model() -> None:
    decoder = st.session_state.get("sb_kind") == Kind.DECODER.value
    st.session_state["sb_kind"] = (Kind.ENCODER if decoder else Kind.DECODER).value


def _toggle_flag(name: str) -> None:
    st.session_state[FLAG + name] = not _flag(name)


def _try_this(action: Action, key: str) -> None:
    st.markdown("**Try this**")
    if isinstance(action, SetSidebar):
        st.button(action.label, key=key, on_click=_set_sidebar, args=(action.text, action.kind))
    elif isinstance(action, ToggleModel):
        decoder = sidebar_input().source.kind is Kind.DECODER
        st.button("Switch the model back to the pretrained encoder" if decoder
                  else "Switch the model to the causal decoder", key=key, on_click=_toggle_model)
    elif isinstance(action, Switch):
        st.button(action.turn_off if _flag(action.name) else action.turn_on, key=key,
                  on_click=_toggle_flag, args=(action.name,))
    else:
        example = BY_KEY[action.example]
        st.page_link(example.page_file, label=action.label, icon=":material/open_in_new:",
                     query_params=link_params(example))


def _check(lesson: str, number: int, question: Question) -> None:
    st.markdown("**Check**")
    key = f"lessons_answer_{lesson}_{number}"
    stored = progress()["answers"].get((lesson, number))
    choice = st.radio(question.prompt, range(len(question.choices)), index=stored,
                      format_func=lambda i: question.choices[i].text, key=key,
                      on_change=_answered, args=(lesson, number, key))
    if choice is not None:
        picked = question.choices[choice]
        if picked.right:
            st.success(f"Right. {picked.why}", icon=":material/check_circle:")
        else:
            st.warning(f"Not quite. {picked.why}", icon=":material/help:")


def show_step(lesson_key: str, number: int) -> None:
    """One step: text, figure, try this, check question, previous/next and progress."""
    lesson = BY_LESSON[lesson_key]
    step = lesson.steps[number - 1]
    prefix = f"lessons_{lesson_key}_{number}"
    st.subheader(f"{number}. {step.title}")
    st.markdown(step.text)
    step.figure(f"{prefix}_figure")
    _try_this(step.action, f"{prefix}_try")
    _check(lesson_key, number, step.question)
    back, forward = st.columns(2)
    back.button("← Previous", key="lessons_previous", disabled=number == 1, width="stretch",
                on_click=_move, args=(lesson_key, number, -1))
    last = number == len(lesson.steps)
    forward.button("Finish the lesson" if last else "Next →", key="lessons_next", type="primary",
                   width="stretch", on_click=_move, args=(lesson_key, number, 0 if last else 1))
    state = progress()
    count = len(lesson.steps)
    done = sum((lesson_key, n) in state["done"] for n in range(1, count + 1))
    right = sum((lesson_key, n) in state["right"] for n in range(1, count + 1))
    st.progress(done / count, text=f"This lesson: {done} of {count} steps done, {right} of "
                                   f"{count} questions answered right.")
