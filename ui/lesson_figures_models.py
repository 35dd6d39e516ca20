"""The live figures of the lessons on what surrounds attention and what a head does (fine-tuning,
interventions, the encoder block, BERT's pretraining, the output layer), drawn on the user's
own sentence from the app's caches."""

from __future__ import annotations

import streamlit as st

from models.analysis.compare import head_changes
from models.errors import ModelLoadError, first_sentence
from models.experiments.labelled_data import load_shipped
from models.experiments.masked_lm import next_sentence_pairs, read_corpus
from models.experiments.patching import HEAD
from models.loading.kinds import DECODER
from models.loading.source import ModelSource
from ui import (cache, finetune_cache, interventions_cache, layer_walk_cache, masked_lm_cache,
                teaching_cache as teach)
from ui.examples import FACT_ANSWER, FACT_CLEAN, IOI_ANSWER, IOI_CLEAN, IOI_CORRUPTED, IOI_WRONG
from ui.lesson_figure_kit import show_figure
from ui.state import loaded_source, sidebar_input
from ui.text import plain
from viz.interventions import patching_map, rank_figure, shares_map
from viz.layer_walk import steps_figure, steps_table
from viz.masked_lm import recipe_table, sentence_pairs_table
from viz.positions import similarity_heatmap
from viz.predictions import candidate_bars, loss_figure as position_loss_figure
from viz.training import change_heatmap, data_figure, probabilities_figure

POSITIONS_SHOWN, POSITION_WIDTH = 32, 64  # the sinusoids' similarity map of the positions step


def finetune_data_figure(key: str) -> None:
    data = load_shipped()
    show_figure(data_figure(data.class_names, data.split_counts(False),
                                  data.split_counts(True)), key)
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
        show_figure(probabilities_figure(change.before, change.after), key)


def finetune_heads_figure(key: str) -> None:
    change = _fine_tuned()
    if change is not None:
        show_figure(change_heatmap(head_changes(change.before_record, change.after_record)), key)


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
    show_figure(rank_figure(lens.chosen_rank[:, last], lens.chosen_probability[:, last], lens.rows,
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
    show_figure(shares_map(shares.heads, "Each head's direct share of the logit difference"), key)
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
    show_figure(patching_map(grid.values, grid.raw, rows, heads, "Each head patched back alone",
                             ("layer", "head")), key)
    st.caption(plain(f"'{IOI_CORRUPTED}' run with one head's output from '{IOI_CLEAN}': 1 "
                     f"brings {grid.difference.answer_text!r} fully back, 0 changes nothing."))


RECIPE_PASSAGE = ("The bakery on the corner opens at six, but the smell of bread reaches the bus "
                  "stop long before that.")


NSP_PAIRS = 6


MASKED_TEXT = "The bakery on the corner opens at [MASK]."


def positions_figure(key: str) -> None:
    title = f"How alike two sinusoidal positions are (d = {POSITION_WIDTH})"
    show_figure(similarity_heatmap(teach.sinusoid_similarity(POSITIONS_SHOWN, POSITION_WIDTH),
                                   title), key)
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
        show_figure(steps_figure(walk), key)
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
    show_figure(candidate_bars(fillers.candidates, f"'{MASKED_TEXT}': the top 10 fillers"), key)
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
        show_figure(candidate_bars(trace.predictions.next_token.candidates,
                                   f"'{FACT_CLEAN}': the top 10 next tokens"), key)
        st.caption(plain(f"The causal decoder's output layer after the last token: one score "
                         f"per vocabulary token, turned into probabilities by a softmax. "
                         f"{trace.record.source}."))


def loss_step_figure(key: str) -> None:
    trace = _decoder_trace()
    if trace is not None and trace.predictions.positions is not None:
        positions = trace.predictions.positions
        show_figure(position_loss_figure(positions), key)
        st.caption(plain(f"At every position, −log₂ of the probability the model gave the token "
                         f"that came next; the mean is {positions.mean_loss_bits:.2f} bits."))
