import streamlit as st

from models.scratch.adaptive_span import apply_span, ramp_curve
from models.teaching.span_training import SpanTrainingConfig, load_learned_spans, train_span_model
from ui import charts
from ui.routing import through_app
from ui.state import current_record, index_slider
from ui.text import plain
from viz.labels import display_tokens
from viz.span import (
    before_after_heatmaps, learned_spans_figure, loss_figure, ramp_figure, removed_mass_figure,
)

through_app()

MAX_SPAN = 64.0  # slider bounds: z >= 0 and R > 0 by construction
STEP = 0.5
RAMP_VIEW_MARGIN = 4.0  # tokens of flat zero drawn after the ramp
PER_HEAD_COLUMNS = 4
FORMS = {"causal": "Causal: distance i − j to earlier tokens (later tokens are outside)",
         "symmetric": "Symmetric: distance |i − j|, both directions (for encoders)"}
TRAINED = "span_trained_result"  # session key: spans trained live on this page

st.title("Adaptive attention span")
# The span's choices beside its soft mask, so the ramp is on a projector's first screen.
setup, picture = st.columns([1, 2], gap="medium")
setup.markdown(
    "Every head compares each token with every other token, which costs more and more as texts "
    "get longer, yet many heads only ever look a few tokens back. **Adaptive attention span** "
    "(Sukhbaatar et al., 2019) gives each head a span *z*: keys within *z* tokens keep their "
    "weight, keys further away are faded out over a ramp of width *R*, and the remaining weights "
    "of each row are rescaled to add up to 1 again. Because the fade is a straight slope rather "
    "than a cliff, training can nudge *z* up or down like any other weight, and a small penalty "
    "on *z* makes a head keep a long span only if it needs one."
)
st.session_state.setdefault("span_z", 3.0)
st.session_state.setdefault("span_ramp", 2.0)
span = setup.slider("Span z (tokens)", 0.0, MAX_SPAN, step=STEP, key="span_z")
ramp = setup.slider("Ramp width R (tokens)", 0.5, 16.0, step=STEP, key="span_ramp")
curve = ramp_curve(span, ramp, span + ramp + RAMP_VIEW_MARGIN)
picture.subheader("The soft mask")
charts.show(ramp_figure(curve.distances, curve.values, span, ramp), key="span_ramp_chart",
            container=picture)
picture.caption(f"Up to distance {span:g} a key keeps all its weight; at {span + ramp / 2:g} "
                f"half of it; from {span + ramp:g} on none. The slope is −1/R, so the gradient "
                "with respect to z comes only from keys on the ramp.")

st.subheader("A span applied to a real head")
st.markdown(
    "Here the span is laid over attention the model already computed (it was not trained with "
    "one): the weights are multiplied by the mask and each row is divided by what is left. The "
    "bars show how much of each row's attention fell outside the span. The token itself is at "
    "distance 0, where the mask is always 1, so a row loses everything only if the head gave "
    "no weight at all to the keys inside the span; such a row has nothing left to rescale and "
    "is drawn as zeros (and marked in dark red), never as a division by zero."
)
record = current_record()
if record is not None:
    st.session_state.setdefault("span_form", list(FORMS)[0 if "causal" in record.masks else 1])
    form = st.radio("Distance", list(FORMS), format_func=FORMS.get, key="span_form")
    causal = form == "causal"
    if causal and "causal" not in record.masks:
        st.info("This model looks both ways. In the causal form every later token is outside "
                "the span, so the removed mass includes all the weight it gave to later tokens.")
    left, right = st.columns(2)
    layer = index_slider("Layer", record.num_layers, "span_layer", left)
    head = index_slider("Head", record.num_heads, "span_head", right)
    spans = span
    if st.toggle("A different z for each head (the same in every layer)", key="span_per_head"):
        columns = st.columns(PER_HEAD_COLUMNS)
        for h in range(record.num_heads):  # each head starts at the span above
            st.session_state.setdefault(f"span_z_head_{h}", span)
        spans = [columns[h % PER_HEAD_COLUMNS].slider(f"z, head {h}", 0.0, MAX_SPAN, step=STEP,
                                                      key=f"span_z_head_{h}")
                 for h in range(record.num_heads)]
    applied = apply_span(record, spans, ramp, causal)
    st.caption(f"{record.num_tokens} tokens · {record.source}")
    before, after = before_after_heatmaps(record, applied.record, layer, head,
                                          float(applied.spans[layer, head]), ramp)
    left, right = st.columns(2)
    charts.show(before, key="span_before", container=left)
    charts.show(after, key="span_after", container=right)
    st.metric("Attention mass this span removes from the head (mean over rows)",
              f"{applied.mean_removed(layer, head):.1%}")
    charts.show(removed_mass_figure(record.tokens, applied.removed[layer, head],
                                    applied.emptied[layer, head], layer, head),
                key="span_removed")
    emptied = applied.emptied_rows(layer, head)
    if emptied:
        words = display_tokens(record.tokens)  # tokens as words (no byte-level markers)
        names = ", ".join(f"'{words[q]}' (#{q})" for q in emptied)
        st.warning(plain(f"{len(emptied)} row(s) of this head kept no weight at all and are "
                         f"shown as zeros: {names}."))

st.subheader("Spans a small model learned")
st.markdown(
    "A tiny from-scratch encoder (2 layers × 4 heads, causal distances) was trained on random "
    "symbols to name, at every position, **the previous symbol** (one step back) and **the first "
    "symbol of the sequence** (up to 31 steps back), with the span penalty λ · mean(z) added to "
    "the loss. Every head starts with the full span S and the penalty pulls each one down until "
    "the task pushes back. The head that names the previous symbol can end at z ≈ 0: its ramp "
    "still lets the neighbour in (with R = 4, at three quarters of its weight before "
    "rescaling). Reaching the first symbol needs long spans: one long head, or a layer-0 and a "
    "layer-1 head whose reaches add up, since a layer-1 head can pass on what a layer-0 head "
    "already gathered (try another seed). **Hover a bar** "
    "to see the accuracy left when that head is switched off: it tells which head does which job."
)
result = st.session_state.get(TRAINED)
if result is None:
    try:
        result = load_learned_spans()
    except (OSError, ValueError, KeyError, TypeError) as error:
        st.error(f"The shipped file of learned spans could not be read ({error}); "
                 "train the model below instead.")
left, right = st.columns([1, 2])
st.session_state.setdefault("span_seed", SpanTrainingConfig.seed)
seed = left.number_input("Seed for retraining", 0, 10_000, step=1, key="span_seed")
if right.button("Retrain now (about 20 s on 2 CPU cores)", key="span_retrain"):
    bar = st.progress(0.0, text="Training…")
    _, result = train_span_model(
        SpanTrainingConfig(seed=int(seed)),
        progress=lambda step, total, loss: bar.progress(
            step / total, text=f"Step {step} of {total} · task loss {loss:.4f}"),
    )
    st.session_state[TRAINED] = result
if result is not None:
    origin = ("trained just now" if st.session_state.get(TRAINED) is result
              else "shipped with the app (scripts/train_span.py)")
    settings = result.settings
    st.caption(
        f"Model {origin}: seed {settings.seed}, {settings.steps} steps in {result.seconds:.1f} s, "
        f"S = {settings.max_span:g}, R = {settings.ramp:g}, λ = {settings.penalty:g}. Accuracy "
        f"after training: previous symbol {result.accuracy['previous']:.1%}, first symbol "
        f"{result.accuracy['first']:.1%}."
    )
    charts.show(learned_spans_figure(result.span_array, settings.max_span, settings.ramp,
                                     result.ablation), key="span_learned")
    charts.show(loss_figure(result.loss_steps, result.losses), key="span_loss")
