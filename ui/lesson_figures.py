"""The live figures of the lessons' steps, drawn on the user's own sentence from the app's
caches (never made-up numbers; the only training here is the lesson's fine-tuned classifier,
once per machine, kept on disk)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from models.scratch.adaptive_span import apply_span, ramp_curve
from models.teaching.arithmetic import RowArithmetic, row_arithmetic
from models.errors import ModelLoadError, first_sentence
from models.analysis.compare import head_changes
from models.analysis.head_finder import TokenNotFound, every_position, locate, query_to_keys
from models.experiments.labelled_data import load_shipped
from models.teaching.scaling import entropy_bits, softmax
from models.experiments.patching import HEAD
from models.loading.kinds import DECODER
from models.loading.source import ModelSource
from models.teaching.span_training import load_learned_spans
from models.teaching.translation_task import EXAMPLE_SENTENCES
from models.experiments.masked_lm import next_sentence_pairs, read_corpus
from models.teaching.attention_cost import MINILM, crossover_tokens, flop_count
from models.teaching.neuron_view import neuron_inputs
from ui import (cache, charts, finetune_cache, interventions_cache, layer_walk_cache,
                masked_lm_cache, seq2seq_cache, teaching_cache as teach)
from ui.examples import (FACT_ANSWER, FACT_CLEAN, IOI_ANSWER, IOI_CLEAN, IOI_CORRUPTED,
                         IOI_WRONG)
from ui.links import shared_params
from ui.state import current_record, current_trace, loaded_source, sidebar_input
from ui.text import plain
from viz.arithmetic import row_steps_figure
from viz.head_analysis import layer_head_map
from viz.interventions import patching_map, rank_figure, shares_map
from viz.heatmap import attention_heatmap, layer_heads_grid
from viz.labels import token_text
from viz.masks import mask_steps_figures, side_by_side
from viz.scaling import dot_product_figure, softmax_bars_figure
from viz.span import before_after_heatmaps, learned_spans_figure, ramp_figure
from viz.training import change_heatmap, data_figure, probabilities_figure
from viz.attention_cost import flops_figure
from viz.layer_walk import steps_figure, steps_table
from viz.masked_lm import recipe_table, sentence_pairs_table
from viz.neuron_view import MAX_TOKENS as NEURON_TOKENS, neuron_view_html
from viz.positions import similarity_heatmap
from viz.predictions import candidate_bars, loss_figure as position_loss_figure

FLAG = "lessons_flag_"  # session keys of the lessons' on/off "try this" switches
SPAN, RAMP = 5.0, 2.0  # the chapter's span of 5 tokens, with a ramp of 2
PADDED_WITH = "I love Paris."  # the short sentence batched with the user's
COST_LENGTHS_SHOWN = (16, 64, 256, 1024, 4096, 16384)


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
    caption = (f"Layer 0 · head 0 · query #{query} "
               f"'{token_text(record.tokens[query], record.tokens)}' · "
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
    row, tokens, caption = found
    allowed = row.allowed
    unscaled = np.zeros_like(row.dots)
    unscaled[allowed] = softmax(row.dots[allowed])
    entropies = (float(entropy_bits(unscaled)), float(entropy_bits(row.weights)))
    _show(softmax_bars_figure(row.query.shape[-1], unscaled_scores=row.dots,
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
    """Before/after of the sidebar's sentence on the lesson's fine-tuned model: read from this
    server or from disk, else trained now (once per machine) with a progress bar."""
    given = sidebar_input()
    data = load_shipped()
    settings = finetune_cache.lesson_settings()
    result = finetune_cache.cached(given.encoder_name, data, settings)
    if result is None:
        bar = st.progress(0.0, text="Fine-tuning the classifier for this step (once per "
                                    "machine, a minute or two; it is kept on disk)…")
        try:
            result = finetune_cache.trained(
                given.encoder_name, data, settings,
                lambda fraction, message: bar.progress(min(fraction, 1.0), text=plain(message)))
        except ModelLoadError as error:
            st.error(plain(str(error)))
            return None
        except (ValueError, RuntimeError, OSError) as error:
            st.error(plain(f"Training failed: {first_sentence(error)}"))
            return None
        finally:
            bar.empty()
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


# --- positions, the encoder block, BERT's pretraining, the output layer -------------------------

POSITIONS_SHOWN, POSITION_WIDTH = 32, 64  # the sinusoids' similarity map of the positions step
RECIPE_PASSAGE = ("The bakery on the corner opens at six, but the smell of bread reaches the bus "
                  "stop long before that.")
NSP_PAIRS = 6
MASKED_TEXT = "The bakery on the corner opens at [MASK]."


def positions_figure(key: str) -> None:
    _show(similarity_heatmap(teach.sinusoid_similarity(POSITIONS_SHOWN, POSITION_WIDTH),
                             f"How alike two sinusoidal positions are (d = {POSITION_WIDTH})"), key)
    st.caption("Each cell compares the position vectors of two positions: 1 on the diagonal, "
               "and the same value all along each diagonal, so it depends only on how far apart "
               "two tokens are.")


def _walk():
    """The sidebar's sentence through layer 0 of the sidebar's encoder, step by step."""
    given = sidebar_input()
    if not given.text.strip():
        st.info("Type a sentence in the sidebar to follow it through the layer.")
        return None
    try:
        return layer_walk_cache.pretrained_walk(given.encoder_name, given.text, 0)
    except (ModelLoadError, ValueError) as error:  # a model the walk cannot follow, too
        st.info(plain(str(error)))
        return None


def block_walk_figure(key: str) -> None:
    walk = _walk()
    if walk is not None:
        _show(steps_figure(walk), key)
        st.caption(plain(f"{walk.model_label}: your sentence through layer 0, with the shape of "
                         "every intermediate tensor (B batch, T tokens, D width)."))


def block_table_figure(key: str) -> None:
    walk = _walk()
    if walk is not None:
        st.dataframe(steps_table(walk), hide_index=True, key=key)
        st.caption("Every step recomputed by hand from the layer's weights, and how far it is "
                   "from the model's own tensor: the residual sums and layer norms included.")


def recipe_figure(key: str) -> None:
    st.dataframe(recipe_table(masked_lm_cache.recipe_example(RECIPE_PASSAGE, 0)),
                 hide_index=True, key=key)
    st.caption("One passage of the app's corpus through the recipe (seed 0). A new draw is made "
               "every time the passage is seen in training.")


def next_sentence_figure(key: str) -> None:
    pairs = next_sentence_pairs(read_corpus(), NSP_PAIRS, seed=0)
    st.dataframe(sentence_pairs_table(pairs), hide_index=True, key=key)
    st.caption("Pairs built from the app's corpus as BERT built them: the passage's own "
               "continuation half of the time, a part of another passage otherwise.")


def mask_filling_figure(key: str) -> None:
    if not masked_lm_cache.is_pretrained(0):
        st.info("The masked LM has not been pretrained on this machine yet: open its page "
                "below (it pretrains once, with a progress bar, and keeps it on disk).")
        return
    trace = masked_lm_cache.trace(0, MASKED_TEXT)
    (fillers,) = trace.predictions.masks
    _show(candidate_bars(fillers.candidates, f"'{MASKED_TEXT}': the top 10 fillers"), key)
    st.caption(plain(f"{trace.record.source}. Pretrained on a few thousand tokens, it has "
                     "learned frequent words and short patterns, not facts."))


def _decoder_trace():
    try:
        source = _decoder()
        loaded_source(source)  # the embedded decoder is prepared once, with progress
        return cache.trace(source, FACT_CLEAN, "")
    except (ModelLoadError, ValueError) as error:
        st.error(plain(str(error)))
        return None


def output_layer_figure(key: str) -> None:
    trace = _decoder_trace()
    if trace is not None:
        _show(candidate_bars(trace.predictions.next_token.candidates,
                             f"'{FACT_CLEAN}': the top 10 next tokens"), key)
        st.caption(plain(f"The causal decoder's output layer after the last token: one score "
                         f"per vocabulary token, turned into probabilities by a softmax. "
                         f"{trace.record.source}."))


def loss_step_figure(key: str) -> None:
    trace = _decoder_trace()
    if trace is not None and trace.predictions.positions is not None:
        positions = trace.predictions.positions
        _show(position_loss_figure(positions), key)
        st.caption(plain(f"At every position, −log₂ of the probability the model gave the token "
                         f"that came next; the mean is {positions.mean_loss_bits:.2f} bits."))


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
    _show(flops_figure(counts, crossover_tokens(MINILM), MINILM.name), key)
