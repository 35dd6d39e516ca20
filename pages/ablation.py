import streamlit as st

from models.limits import MAX_TEXT_CHARS
from models.experiments.ablation import ABLATION_MODES, MEAN, ZERO
from models.experiments.targets import (CLASS_PROBABILITY, MASKED_WORD, NoPrediction,
                                        no_prediction_message)
from ui import analysis_cache, charts, finetune_cache
from ui.routing import through_app
from ui.state import current_record, first_choice, index_slider, sidebar_input
from ui.text import plain
from viz.head_analysis import importance_map, most_important, prediction_table
from viz.heatmap import attention_heatmap
from viz.labels import display_tokens

MODE_LABELS = {ZERO: "Zero: the head outputs 0",
               MEAN: "Mean: the head outputs its average over this input's tokens"}
IMPORTANT_HEADS = 8
GRID_REQUEST = "ablation_grid_request"  # session key: the input the grid was asked for
SIDEBAR_MODEL, CLASSIFIER = "sidebar model", "classifier"
NO_CLASSIFIER = ("A fine-tuned classifier appears here too, with the probability of a class to "
                 "watch, once one has been fine-tuned on the Fine-tuning page.")


def remember_grid_request(request: tuple) -> None:
    """Button callback: the grid stays shown for this input until the input changes."""
    st.session_state[GRID_REQUEST] = request


through_app()

st.title("Ablation and knockout")
st.markdown(
    "Test what a head does by switching it off. **Ablating** a head replaces its output by 0 "
    "(or by its average output) and the model runs again: if the prediction barely moves, the "
    "model did not need that head here. **Knockout** (Geva et al. 2023) removes single "
    "attention edges instead: a query may no longer look at chosen keys in chosen layers."
)
record = current_record(apply_options=False)
if record is None:
    st.stop()
given = sidebar_input()
source, text, pair = given.source, given.text, given.pair
if given.merge_words or given.hide_special:
    st.caption("These experiments run on the model's own tokens, so the sidebar's token "
               "options do not apply here.")
kind = analysis_cache.prediction_kind(source)
classifiers = {finished.key: finished for finished in finetune_cache.finished(given.encoder_name)}
subject = SIDEBAR_MODEL
if classifiers:
    st.session_state.setdefault("ablation_subject",
                                SIDEBAR_MODEL if kind is not None else CLASSIFIER)
    subject = st.radio("What to ablate", (SIDEBAR_MODEL, CLASSIFIER), key="ablation_subject",
                       horizontal=True,
                       format_func={SIDEBAR_MODEL: plain(f"The sidebar's model ({source.label})"),
                                    CLASSIFIER: "The fine-tuned classifier"}.get)
else:
    st.caption(NO_CLASSIFIER)
if subject == CLASSIFIER:
    key = st.selectbox("Fine-tuned classifier (trained on this server)", list(classifiers),
                       key="ablation_classifier",
                       format_func=lambda k: classifiers[k].description)
    source, pair = analysis_cache.classifier_of(classifiers[key]), ""
    kind = CLASS_PROBABILITY
if kind is None:
    st.warning(plain(no_prediction_message(source.label)))
    st.stop()

# The prediction every experiment below reads
mask_position, target_id = None, None
if kind == CLASS_PROBABILITY:
    try:
        top = analysis_cache.baseline(source, text, pair, None)
    except ValueError as error:
        st.error(plain(str(error)))
        st.stop()
    names = analysis_cache.class_names(source)
    first_choice("ablation_class", range(len(names)), top.target.token_id)
    target_id = st.selectbox("Class to watch", list(range(len(names))), key="ablation_class",
                             format_func=names.__getitem__)
    baseline = analysis_cache.baseline(source, text, pair, None, target_id)
    record = baseline.record  # the classifier's own encoder: its layers, heads and tokens
    st.caption(plain(f"The classifier reads the sidebar's first sentence and predicts "
                     f"'{top.target.text}'; every experiment below reads the probability it "
                     f"gives '{baseline.target.text}'."))
elif kind == MASKED_WORD:
    words = [p for p in range(record.num_tokens) if p not in record.special_positions]
    shown = display_tokens(record.tokens)  # tokens as words (no byte-level markers)
    mask_position = st.selectbox("Word to hide behind the mask", words, key="ablation_mask",
                                 format_func=lambda p: f"{shown[p]} (#{p})")
    baseline = analysis_cache.baseline(source, text, pair, mask_position)
    target_id = baseline.target.token_id
    st.caption(plain(f"The model reads the sentence with '{baseline.target.text}' masked and is "
                     "asked for the masked word."))
else:
    top = analysis_cache.baseline(source, text, pair, None)
    word = st.text_input("Next token to follow", key="ablation_target", max_chars=MAX_TEXT_CHARS,
                         placeholder=top.target.text.strip(),
                         help="Empty: the model's own most probable next token.")
    target_id = top.target.token_id
    if word.strip():
        try:
            target_id = analysis_cache.target_id_of(source, text, pair, word)
        except ValueError as error:
            st.error(plain(str(error)))
            st.stop()
    baseline = analysis_cache.baseline(source, text, pair, None, target_id)
st.metric(plain(f"P({baseline.target.text!r}) without any edit"), f"{baseline.probability:.4g}")

ablate_tab, grid_tab, knockout_tab = st.tabs(["Ablate heads", "Every head alone",
                                              "Knock out edges"])
labels = {f"{layer}-{head}": f"layer {layer} · head {head}"  # "layer-head": one link word
          for layer in range(record.num_layers) for head in range(record.num_heads)}

with ablate_tab:
    mode = st.radio("Ablation", ABLATION_MODES, format_func=MODE_LABELS.get, key="ablation_mode",
                    horizontal=True)
    chosen = st.multiselect("Heads to ablate", list(labels), format_func=labels.get,
                            key="ablation_heads", placeholder="Choose one or more heads",
                            filter_mode="contains", select_all=False)
    if not chosen:
        st.info("Choose at least one head to ablate.")
    else:
        if len(chosen) == len(labels):
            st.warning("Every head is ablated: no token can read any other token any more, so "
                       "the prediction rests on each token's own vector and the feed-forward "
                       "layers alone.")
        heads = tuple(sorted(tuple(int(n) for n in choice.split("-")) for choice in chosen))
        result = analysis_cache.head_ablation(source, text, pair, mask_position, target_id,
                                              heads, mode)
        st.metric(plain(f"P({result.after.target.text!r}) with {len(chosen)} head(s) ablated"),
                  f"{result.after.probability:.4g}", f"{result.change:+.4g}")
        st.dataframe(prediction_table(
            [(c.text, c.probability) for c in result.before.candidates],
            [(c.text, c.probability) for c in result.after.candidates]),
            hide_index=True, key="ablation_predictions")
        left, right = st.columns(2)
        layer = index_slider("Layer", record.num_layers, "ablation_layer", left)
        head = index_slider("Head", record.num_heads, "ablation_head", right)
        before_map, after_map = st.columns(2)
        charts.show(attention_heatmap(result.before.record, layer, head),
                    key="ablation_before", container=before_map)
        before_map.caption("Before")
        charts.show(attention_heatmap(result.after.record, layer, head),
                    key="ablation_after", container=after_map)
        after_map.caption("After: later layers see the edited outputs, so their maps can move.")

with grid_tab:
    st.markdown(
        "Each head of the model is ablated **alone** and the change of the target's "
        "log-probability is shown (Michel et al. 2019): red cells are heads the prediction "
        "needs (it drops without them), blue cells heads that held it back. Several ablations "
        "share one batched forward pass."
    )
    grid_mode = st.radio("Ablation", ABLATION_MODES, format_func=MODE_LABELS.get,
                         key="ablation_grid_mode", horizontal=True)
    request = (source, text, pair, mask_position, target_id, grid_mode)
    st.button(f"Ablate each of the {len(labels)} heads", key="ablation_grid_run",
              on_click=remember_grid_request, args=(request,))
    if st.session_state.get(GRID_REQUEST) == request:
        bar = st.progress(0.0, text="Ablating one head at a time…")
        changes = analysis_cache.importance(
            *request, _progress=lambda done, total: bar.progress(
                done / total, text=f"Ablated {done} of {total} heads…"))
        bar.empty()
        charts.show(importance_map(changes, repr(baseline.target.text)), key="ablation_grid")
        st.dataframe(most_important(changes, IMPORTANT_HEADS), hide_index=True,
                     key="ablation_grid_table")

with knockout_tab:
    st.markdown(
        "Block the attention **edges** from one query token to chosen key tokens in a window "
        "of layers (the scores are set to the lowest number before the softmax, so the query "
        "spreads its attention over the other tokens) and see what the prediction loses."
    )
    positions = list(range(record.num_tokens))
    words = display_tokens(record.tokens)  # tokens as words (no byte-level markers)
    default_query = mask_position if mask_position is not None else record.num_tokens - 1
    first_choice("ablation_ko_query", positions, default_query)
    query = st.selectbox("Query token", positions, key="ablation_ko_query",
                         format_func=lambda p: f"{words[p]} (#{p})")
    keys = st.multiselect("Key tokens it may no longer see", positions, key="ablation_ko_keys",
                          format_func=lambda p: f"{words[p]} (#{p})",
                          filter_mode="contains", select_all=False)
    if record.num_layers > 1:
        first_choice("ablation_ko_layers", range(record.num_layers), (0, record.num_layers - 1))
        first, last = st.select_slider("Layers", list(range(record.num_layers)),
                                       key="ablation_ko_layers")
    else:
        first = last = 0
    if not keys:
        st.info("Choose at least one key token to block.")
    else:
        try:
            blocked = analysis_cache.knockout(source, text, pair, mask_position, target_id,
                                              query, tuple(sorted(keys)),
                                              tuple(range(first, last + 1)))
        except (ValueError, NoPrediction) as error:
            st.error(plain(str(error)))
        else:
            st.metric(plain(f"P({blocked.after.target.text!r}) with the edges blocked in "
                            f"layers {first}–{last}"), f"{blocked.after.probability:.4g}",
                      f"{blocked.change:+.4g}")
            st.dataframe(prediction_table(
                [(c.text, c.probability) for c in blocked.before.candidates],
                [(c.text, c.probability) for c in blocked.after.candidates]),
                hide_index=True, key="ablation_ko_predictions")
