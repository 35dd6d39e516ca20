import streamlit as st

from models.errors import ModelLoadError
from models.limits import WALK_BATCH, WALK_SCRATCH_LAYERS, WALK_TOKENS
from models.teaching.layer_walk import WalkMismatch, WalkUnavailable
from ui import cache, charts
from ui.layer_walk_cache import pretrained_walk, scratch_walk
from ui.routing import through_app
from ui.state import index_slider, sidebar_input
from viz.layer_walk import head_map, matrices_figure, shape_text, steps_figure, steps_table

HIDDEN_SIZES = (32, 64, 96, 128, 256, 384)  # 384 x 6 layers: about 90 MB of weights
HEAD_COUNTS = (1, 2, 3, 4, 6, 8, 12, 16)
PRETRAINED, SCRATCH = "pretrained", "scratch"


through_app()

st.title("Inside one encoder layer")
st.markdown(
    "Follow the sidebar's sentence through one layer of an encoder, one step at a time: the "
    "token, position and segment embeddings, the layer norm, the queries, keys and values "
    "(Q = E·W_Q and so on), the split into heads, each head's softmax(QKᵀ/√d_k)·V, the heads "
    "joined again, the output matrix W_O, the residual sums and norms, and the feed-forward "
    "network. Next to each step is the **shape** of the tensor at that point, read from the "
    "running model: (batch, tokens, width) for the whole sentence, (batch, heads, tokens, head "
    "width) once it is split into heads."
)
given = sidebar_input()
if not given.text.strip():
    st.info("Type a sentence in the sidebar to follow it through a layer.")
    st.stop()
if given.pair:
    st.caption("This page follows the first sentence only; the second one is not used here.")

kind = st.radio("Encoder", (PRETRAINED, SCRATCH), horizontal=True, key="encoder_layer_kind",
                format_func={PRETRAINED: f"Pretrained: {given.encoder_name}",
                             SCRATCH: "From scratch (random weights, sizes you choose)"}.get)
try:
    loaded = cache.pretrained(given.encoder_name)
except ModelLoadError as error:
    st.error(str(error))
    st.stop()

if kind == SCRATCH:
    st.markdown("Seed 004's exercise uses a batch of **16 sentences of 32 tokens, 64 numbers "
                "each**, with 8 heads: the defaults below. Shorter sentences are padded to 32 "
                "tokens and the attention mask stops every query from looking at the padding.")
    size_column, head_column, layer_column, norm_column = st.columns(4)
    st.session_state.setdefault("encoder_layer_hidden", 64)
    hidden = size_column.selectbox("Hidden size D", HIDDEN_SIZES, key="encoder_layer_hidden")
    allowed_heads = [h for h in HEAD_COUNTS if hidden % h == 0]
    if st.session_state.get("encoder_layer_heads") not in allowed_heads:
        st.session_state["encoder_layer_heads"] = 8 if 8 in allowed_heads else allowed_heads[-1]
    heads = head_column.selectbox("Heads H", allowed_heads, key="encoder_layer_heads")
    head_column.caption(f"Head size d_k = D / H = {hidden // heads}")
    for key, default in (("encoder_layer_layers", 2), ("encoder_layer_batch", 16),
                         ("encoder_layer_length", 32), ("encoder_layer_seed", 0)):
        st.session_state.setdefault(key, default)
    layers = layer_column.number_input("Layers", 1, WALK_SCRATCH_LAYERS,
                                       key="encoder_layer_layers")
    norm_style = norm_column.radio("Layer norm", ("post", "pre"), key="encoder_layer_norm",
                                   format_func={"post": "after each sum (BERT)",
                                                "pre": "before each sub-layer"}.get)
    batch_column, length_column, seed_column = st.columns(3)
    batch_size = batch_column.number_input("Batch size B", 1, WALK_BATCH,
                                           key="encoder_layer_batch")
    length = length_column.number_input("Tokens per sentence T", 4, WALK_TOKENS,
                                        key="encoder_layer_length")
    seed = seed_column.number_input("Seed", 0, 2**31 - 1, key="encoder_layer_seed")
    count = int(layers)
else:
    count = getattr(loaded.model.config, "num_hidden_layers", 0) or 1
layer = index_slider("Layer", count, "encoder_layer_layer")

try:
    if kind == SCRATCH:
        walk = scratch_walk(given.encoder_name, (hidden, heads, int(layers), norm_style),
                            int(seed), int(batch_size), int(length), given.text, layer)
    else:
        walk = pretrained_walk(given.encoder_name, given.text, layer)
except WalkUnavailable as error:
    st.info(f"This view is not available for this model: {error}.")
    st.stop()
except (WalkMismatch, ValueError) as error:
    st.error(str(error))
    st.stop()

head_column, item_column = st.columns(2)
with head_column:
    head = index_slider("Head", walk.num_heads, "encoder_layer_head")
with item_column:
    item = index_slider("Sentence of the batch", len(walk.tokens), "encoder_layer_item")

batch_size_now, tokens_now = walk.batch_shape
st.caption(f"{walk.model_label} · batch of {batch_size_now} × {tokens_now} tokens · "
           f"{walk.num_heads} heads of width {walk.head_size} · "
           f"{'post' if walk.norm_style == 'post' else 'pre'}-norm · "
           f"input shape {shape_text(walk.step('layer_input').shape)}")
st.success(
    f"Every number here comes from the running model: the walk's last step equals layer "
    f"{walk.layer}'s own output to within {walk.final_difference:.1e}, and each step the model "
    f"keeps a tensor for has that tensor's shape and matches it to within "
    f"{walk.largest_difference:.1e}."
)
charts.show(steps_figure(walk), key="encoder_layer_steps")

st.subheader("The weight matrices")
st.markdown("Each picture is one learned matrix, written as it multiplies from the right "
            "(x · W, rows = what goes in, columns = what comes out). Large matrices are shown "
            "at most 48 × 48: each cell holds the largest entry of its block. The colours stop "
            "at the 99th percentile of the sizes, so a few outliers do not wash out the rest.")
attention_matrices = [walk.matrix(symbol) for symbol in ("W_Q", "W_K", "W_V", "W_O")]
charts.show(matrices_figure(attention_matrices, "Attention: queries, keys, values, output"),
            key="encoder_layer_attention_matrices")
charts.show(matrices_figure([walk.matrix("W_1"), walk.matrix("W_2")],
                            "Feed-forward: widen, then narrow again"),
            key="encoder_layer_ffn_matrices")

st.subheader(f"Head {head}: softmax(QKᵀ/√d_k)")
real = walk.lengths[item]
if real < tokens_now:
    st.caption(f"Sentence {item} has {real} real tokens and {tokens_now - real} padding "
               "tokens: the mask gives the padding columns exactly 0 weight.")
charts.show(head_map(walk, item, head), key="encoder_layer_head_map")

with st.expander("Every step checked against the model"):
    st.dataframe(steps_table(walk), hide_index=True, key="encoder_layer_table",
                 column_config={"largest difference": st.column_config.NumberColumn(format="%.1e")})
