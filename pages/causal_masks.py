import streamlit as st

from models.errors import ModelLoadError
from models.limits import MAX_TEXT_CHARS
from ui import charts
from ui import cache, teaching_cache as teach
from ui.routing import through_app
from ui.state import index_slider, sidebar_input
from ui.text import plain
from viz.masks import mask_steps_figures, side_by_side

through_app()

st.title("Causal and padding masks")
intro, picture = st.columns([1, 2], gap="medium")  # the controls beside the maps they drive
intro.markdown(
    "An encoder such as BERT lets every token look at every other token, left and right. A "
    "decoder that writes text one token at a time must not peek at the words it has not written "
    "yet, so each token may attend only to itself and the tokens **before** it. That rule is a "
    "mask: a lower-triangular grid of allowed cells. Here the sidebar sentence runs through "
    "two copies of the from-scratch encoder that share **every weight**; one of them applies "
    "the causal mask, so any difference you see comes from the mask alone."
)

given = sidebar_input()
text, pair, name = given.text, given.pair, given.encoder_name
seed = given.source.seed  # 0 unless the sidebar's kind is seeded
WEIGHTS = {"random": f"Random weights (seed {seed})",
           "copied": f"{name}'s pretrained weights, copied in"}
choice = intro.radio("Weights of the from-scratch encoder", list(WEIGHTS),
                     format_func=WEIGHTS.get, key="masks_weights")
copied = choice == "copied"

if not text.strip():
    st.info("Type a sentence in the sidebar to see its attention.")
    st.stop()
try:
    if copied and cache.pretrained(name).model_type != "bert":
        st.warning(f"Weights can be copied only from a BERT model; '{plain(name)}' is not one. "
                   "Using random weights.")
        copied = False
    bidirectional = teach.steps(name, seed, copied, False, text, pair)
    causal = teach.steps(name, seed, copied, True, text, pair)
except (ModelLoadError, ValueError) as error:
    st.error(plain(str(error)))
    st.stop()

layer = index_slider("Layer", causal.record.num_layers, "masks_layer", intro)
head = index_slider("Head", causal.record.num_heads, "masks_head", intro)
intro.caption(f"{causal.record.num_tokens} tokens · {causal.record.source}")
if causal.record.dropped_tokens:
    st.warning(f"The input is longer than the encoder's {causal.record.num_tokens} positions: "
               f"the last {causal.record.dropped_tokens} tokens were dropped.")

charts.show(side_by_side((bidirectional.record, causal.record), layer, head,
                         ("Bidirectional<br>(encoder)", "Causal<br>(decoder)")),
            key="masks_side_by_side", container=picture)
picture.markdown(
    "**Bidirectional and causal, side by side.** On the left every row spreads its attention over the whole sentence. On the right row *i* "
    "can only use columns 0 to *i*: everything above the diagonal is exactly 0, the first token "
    "attends only to itself, and each row still adds up to 1. In layer 0 both copies compute "
    "the same raw scores (they see the same embeddings); from layer 1 on the causal copy's "
    "hidden states were themselves built from the past only, so its scores differ as well."
)

st.subheader("Inside one head: from scores to weights")
shown = st.radio("Steps of", ("causal", "bidirectional"), key="masks_steps_of", horizontal=True)
steps = causal if shown == "causal" else bidirectional
st.markdown(
    f"① is the mask (dark: may attend; grey: masked). ② are the raw scores QKᵀ/√d_k with "
    f"d_k = {steps.query.shape[-1]}: every query against every key, future ones included. ③ keeps the "
    "allowed scores and sets the masked ones to −∞; they are drawn grey because they are not a "
    "number to compare, and the colour scale covers only the allowed cells. ④ is the softmax of "
    "each row of ③: e^−∞ = 0, so masked keys get exactly zero weight."
)
figures = mask_steps_figures(steps.record, steps.scores(layer)[head], steps.allowed,
                             steps.query.shape[-1], layer, head)
columns = st.columns(2) + st.columns(2)
for index, (column, figure) in enumerate(zip(columns, figures)):
    charts.show(figure, key=f"masks_step_{index}", container=column)
st.caption(
    f"The scores are q · k of the query and key vectors layer {layer} computed in the same "
    f"forward pass; the softmax of ③ matches the weights the encoder itself returned to within "
    f"{steps.masked_softmax_difference(layer):.1e}."
)

st.subheader("The padding mask: two sentences in one batch")
st.markdown(
    "Models run several sentences at once, and a batch is a rectangle: the shorter sentence is "
    "filled up with `[PAD]` tokens to the length of the longer one. Those are not words, so a "
    "second mask hides them as **keys**: no real token may attend to padding. The `[PAD]` rows "
    "are computed too but nothing reads them."
)
first_column, second_column = st.columns(2)
st.session_state.setdefault("masks_first", "The cat sat.")
st.session_state.setdefault("masks_second",
                            "A much longer sentence about the dog that chased the cat.")
first = first_column.text_input("First sentence", key="masks_first", max_chars=MAX_TEXT_CHARS)
second = second_column.text_input("Second sentence", key="masks_second",
                                  max_chars=MAX_TEXT_CHARS)
forget = st.checkbox("Leave the padding mask out", key="masks_forget")
if not first.strip() or not second.strip():
    st.info("Type two sentences to batch them.")
    st.stop()
try:
    batch = teach.batch(name, seed, copied, first, second)
except (ModelLoadError, ValueError) as error:
    st.error(plain(str(error)))
    st.stop()
records = batch.unmasked if forget else batch.masked
titles = tuple(f"Sentence {i + 1}: {n} tokens + {batch.num_tokens - n} padding"
               for i, n in enumerate(batch.lengths))
charts.show(side_by_side(records, layer, head, titles), key="masks_padding")
short = min(range(len(batch.lengths)), key=batch.lengths.__getitem__)
if not batch.is_padded:
    st.info("Both sentences have the same number of tokens, so there is no padding: make one "
            "of them shorter.")
elif forget:
    st.warning(
        f"Without the mask the `[PAD]` columns take weight like any other key: sentence "
        f"{short + 1}'s real tokens spend on average {batch.unmasked_pad_share[short]:.0%} of "
        "their attention on padding, and its attention differs from running it alone by up to "
        f"{batch.unmasked_difference[short]:.3f}. The answer would depend on what it was batched "
        "with."
    )
else:
    st.success(
        f"With the mask the `[PAD]` columns get exactly 0 weight, so sentence {short + 1} is "
        "treated as if it were alone: its attention matches running it by itself to within "
        f"{batch.alone_difference[short]:.1e} (float rounding). Tick the box to see what "
        "happens without the mask."
    )
