"""The live figures of the lessons' steps, drawn on the user's own sentence from the app's
caches (never made-up numbers; the only training here is the lesson's fine-tuned classifier,
once per machine, kept on disk).

These are the figures of the lessons on attention itself; ui/lesson_figures_models.py draws
those of the lessons on what surrounds it."""

from __future__ import annotations

import numpy as np
import streamlit as st

from models.analysis.head_finder import TokenNotFound, every_position, locate, query_to_keys
from models.errors import ModelLoadError
from models.scratch.adaptive_span import apply_span, ramp_curve
from models.teaching.arithmetic import RowArithmetic, row_arithmetic
from models.teaching.attention_cost import MINILM, crossover_tokens, flop_count
from models.teaching.neuron_view import neuron_inputs
from models.teaching.scaling import entropy_bits, softmax
from models.teaching.span_training import load_learned_spans
from models.teaching.translation_task import EXAMPLE_SENTENCES
from ui import seq2seq_cache, teaching_cache as teach
from ui.lesson_figure_kit import first_word, flag, show_figure
from ui.links import shared_params
from ui.state import current_record, current_trace, sidebar_input
from ui.text import plain
from viz.arithmetic import row_steps_figure
from viz.attention_cost import flops_figure
from viz.head_analysis import layer_head_map
from viz.heatmap import attention_heatmap, layer_heads_grid
from viz.labels import token_text
from viz.masks import mask_steps_figures, side_by_side
from viz.neuron_view import MAX_TOKENS as NEURON_TOKENS, neuron_view_html
from viz.scaling import dot_product_figure, softmax_bars_figure
from viz.span import before_after_heatmaps, learned_spans_figure, ramp_figure


SPAN, RAMP = 5.0, 2.0  # the chapter's span of 5 tokens, with a ramp of 2


PADDED_WITH = "I love Paris."  # the short sentence batched with the user's


COST_LENGTHS_SHOWN = (16, 64, 256, 1024, 4096, 16384)


def _sentence_row() -> tuple[RowArithmetic, tuple[str, ...], str] | None:
    trace = current_trace()
    if trace is None:
        return None
    record = trace.record
    query = first_word(record.tokens)
    caption = (f"Layer 0 · head 0 · query #{query} "
               f"'{token_text(record.tokens[query], record.tokens)}' · "
               f"d_k = {trace.query.shape[-1]} · {record.source}")
    return row_arithmetic(trace, 0, 0, query), record.tokens, caption


def row_figure(key: str) -> None:
    found = _sentence_row()
    if found is not None:
        row, tokens, caption = found
        show_figure(row_steps_figure(row, tokens), key)
        st.caption(plain(caption))


def head_map_figure(key: str) -> None:
    record = current_record()
    if record is not None:
        show_figure(attention_heatmap(record, 0, 0), key)
        st.caption(plain(f"Layer 0 · head 0 · {record.num_tokens} tokens · {record.source}"))


def layer_grid_figure(key: str) -> None:
    record = current_record()
    if record is not None:
        show_figure(layer_heads_grid(record, 0), key)
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
    show_figure(layer_head_map(scores, "Share of the attention of 'he' on 'Mario', per head",
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
    show_figure(dot_product_figure(experiment.dimensions, experiment.mean_abs,
                                   experiment.approximation, samples=experiment.samples,
                                   highlight=highlight), key)
    if highlight is not None:
        st.caption(f"The marker is your model's head size, d_k = {highlight[0]}: random vectors "
                   f"that long have a mean |q·k| of {highlight[1]:.2f}.")


def unscaled_row_figure(key: str) -> None:
    found = _sentence_row()
    if found is None:
        return
    row, tokens, caption = found
    allowed = row.allowed
    unscaled = np.zeros_like(row.dots)
    unscaled[allowed] = softmax(row.dots[allowed])
    entropies = (float(entropy_bits(unscaled)), float(entropy_bits(row.weights)))
    show_figure(softmax_bars_figure(row.query.shape[-1], unscaled_scores=row.dots,
                                    unscaled_weights=unscaled, scaled_scores=row.scaled,
                                    scaled_weights=row.weights, entropies=entropies,
                                    tokens=tokens), key)
    st.caption(plain(f"{caption}. Each pair of bars is one token of your sentence as a key; the "
                     "scaled weights are the ones the model used."))


def _teaching_inputs() -> tuple[str, int, str, str]:
    given = sidebar_input()
    return given.encoder_name, given.source.seed, given.text, given.pair  # seed 0 unless seeded


def masked_scores_figure(key: str) -> None:
    name, seed, text, pair = _teaching_inputs()
    if not text.strip():
        st.info("Type a sentence in the sidebar to see its attention.")
        return
    causal = not flag("bidirectional")
    try:
        steps = teach.steps(name, seed, False, causal, text, pair)
    except (ModelLoadError, ValueError) as error:
        st.error(plain(str(error)))
        return
    figures = mask_steps_figures(steps.record, steps.scores(0)[0], steps.allowed,
                                 steps.query.shape[-1], 0, 0)
    show_figure(figures[2], key)
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
    forget = flag("forget")
    titles = tuple(f"{n} tokens + {batch.num_tokens - n} padding" for n in batch.lengths)
    show_figure(side_by_side(batch.unmasked if forget else batch.masked, 0, 0, titles), key)
    st.caption(plain(f"Your sentence batched with '{PADDED_WITH}', "
                     f"{'without' if forget else 'with'} the padding mask (layer 0 · head 0 of "
                     "the from-scratch encoder)."))


def ramp_figure_step(key: str) -> None:
    curve = ramp_curve(SPAN, RAMP, SPAN + RAMP + 4)
    show_figure(ramp_figure(curve.distances, curve.values, SPAN, RAMP), key)


def span_on_sentence_figure(key: str) -> None:
    record = current_record()
    if record is None:
        return
    applied = apply_span(record, SPAN, RAMP, causal=True)
    _, after = before_after_heatmaps(record, applied.record, 0, 0, SPAN, RAMP)
    show_figure(after, key)
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
    show_figure(learned_spans_figure(result.span_array, settings.max_span, settings.ramp,
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
        show_figure(attention_heatmap(run.cross, last, 0), key)
        st.caption(plain(f"'{source}' → '{run.text}': cross-attention, layer {last} · head 0 of "
                         "the toy translator. Rows are French positions, columns English words."))


def decoder_self_figure(key: str) -> None:
    found = _translation()
    if found is not None:
        run, source = found
        last = run.decoder.num_layers - 1
        show_figure(attention_heatmap(run.decoder, last, 0), key)
        st.caption(plain(f"The decoder's self-attention while writing '{run.text}' "
                         f"(layer {last} · head 0): nothing above the diagonal."))


def neuron_view_figure(key: str) -> None:
    trace = current_trace()
    if trace is None:
        return
    if trace.record.num_tokens > NEURON_TOKENS:
        st.info(f"The neuron view draws up to {NEURON_TOKENS} tokens: use a shorter sentence.")
        return
    st.iframe(neuron_view_html(neuron_inputs(trace, 0), 0, trace.record.source),
              height="content", alt="bertviz neuron view of layer 0, head 0: query, key and "
                                    "product vectors, scores and weights of one token")


def cost_figure(key: str) -> None:
    counts = [flop_count(tokens, MINILM) for tokens in COST_LENGTHS_SHOWN]
    show_figure(flops_figure(counts, crossover_tokens(MINILM), MINILM.name), key)
