"""The live figures of the lessons' steps, drawn on the user's own sentence from the app's
caches (never made-up numbers; nothing here trains a model)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from models.scratch.adaptive_span import apply_span, ramp_curve
from models.teaching.arithmetic import RowArithmetic, row_arithmetic
from models.errors import ModelLoadError
from models.experiments.finetune import DEFAULT_EPOCHS, PRETRAINED, default_settings
from models.analysis.compare import head_changes
from models.analysis.head_finder import TokenNotFound, every_position, locate, query_to_keys
from models.experiments.labelled_data import load_shipped
from models.teaching.scaling import entropy_bits, softmax
from models.experiments.patching import HEAD
from models.loading.kinds import DECODER
from models.loading.source import ModelSource
from models.teaching.span_training import load_learned_spans
from models.teaching.translation_task import EXAMPLE_SENTENCES
from ui import charts, finetune_cache, interventions_cache, seq2seq_cache, teaching_cache as teach
from ui.examples import (FACT_ANSWER, FACT_CLEAN, IOI_ANSWER, IOI_CLEAN, IOI_CORRUPTED,
                         IOI_WRONG)
from ui.links import shared_params
from ui.state import current_record, current_trace, sidebar_input
from ui.text import plain
from viz.arithmetic import row_steps_figure
from viz.head_analysis import layer_head_map
from viz.interventions import patching_map, rank_figure, shares_map
from viz.heatmap import attention_heatmap, layer_heads_grid
from viz.masks import mask_steps_figures, side_by_side
from viz.scaling import dot_product_figure, softmax_bars_figure
from viz.span import before_after_heatmaps, learned_spans_figure, ramp_figure
from viz.training import change_heatmap, data_figure, probabilities_figure

FLAG = "lessons_flag_"  # session keys of the lessons' on/off "try this" switches
SPAN, RAMP = 5.0, 2.0  # the chapter's span of 5 tokens, with a ramp of 2
PADDED_WITH = "I love Paris."  # the short sentence batched with the user's


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
    return given.encoder_name, given.source.seed, given.text, given.pair  # seed 0 unless seeded


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


def _decoder() -> ModelSource:
    """The causal decoder the sidebar would switch to: these steps need a language model."""
    return ModelSource(DECODER, sidebar_input().decoder_name)


def lens_rank_figure(key: str) -> None:
    try:
        lens = interventions_cache.lens(_decoder(), FACT_CLEAN, FACT_ANSWER)
    except (ModelLoadError, ValueError) as error:
        st.error(plain(str(error)))
        return
    last = lens.position
    _show(rank_figure(lens.chosen_rank[:, last], lens.chosen_probability[:, last], lens.rows,
                      lens.chosen_text), key)
    st.caption(plain(f"'{FACT_CLEAN}' on the causal decoder: the rank of {lens.chosen_text!r} "
                     "among all tokens, read from each layer's residual stream."))


def head_shares_figure(key: str) -> None:
    try:
        shares = interventions_cache.direct_attribution(_decoder(), IOI_CLEAN, IOI_ANSWER,
                                                        IOI_WRONG)
    except (ModelLoadError, ValueError) as error:
        st.error(plain(str(error)))
        return
    _show(shares_map(shares.heads, "Each head's direct share of the logit difference"), key)
    st.caption(plain(f"'{IOI_CLEAN}': logit({shares.difference.answer_text!r}) − "
                     f"logit({shares.difference.wrong_text!r}) = "
                     f"{shares.logit_difference:.2f} on the causal decoder, the sum of every "
                     "head's, MLP's, embedding's and bias's share."))


def head_patching_figure(key: str) -> None:
    try:
        with st.spinner("Patching each head (once per server)…"):
            grid = interventions_cache.patching_grid(_decoder(), IOI_CLEAN, IOI_CORRUPTED,
                                                     IOI_ANSWER, IOI_WRONG, HEAD, None)
    except (ModelLoadError, ValueError) as error:
        st.error(plain(str(error)))
        return
    rows = [str(layer) for layer in range(grid.values.shape[0])]
    heads = [str(head) for head in range(grid.values.shape[1])]
    _show(patching_map(grid.values, grid.raw, rows, heads, "Each head patched back alone",
                       ("layer", "head")), key)
    st.caption(plain(f"'{IOI_CORRUPTED}' run with one head's output from '{IOI_CLEAN}': 1 "
                     f"brings {grid.difference.answer_text!r} fully back, 0 changes nothing."))
