import streamlit as st

from models.teaching.arithmetic import key_products, row_arithmetic_from_rows, strongest_keys
from ui import attention as inputs
from ui.charts import show
from ui.routing import through_app
from ui.state import index_slider, sidebar_input
from viz.arithmetic import (output_check, products_figure, row_steps_figure, row_table,
                            vectors_figure)
from viz.labels import display_tokens

through_app()

SHOWN_KEYS = 48  # keys drawn as bars over more keys than this: those with the largest weights
MAX_LISTED_TOKENS = 512  # more tokens than this: the query is a typed position, not a list

st.title("One attention row, step by step")
# The choices beside the four steps, so the steps are on a projector's first screen.
setup, picture = st.columns([1, 2], gap="medium")
setup.markdown("Pick a layer, a head and one **query** token:")
given = sidebar_input()
attention = inputs.current(token_options=False)
if attention is None:
    st.stop()
tokens, special_positions = attention.tokens, attention.special_positions
words = display_tokens(tokens)  # as a person reads them (no byte-level markers)
if given.merge_words or given.hide_special:
    setup.caption("Vectors belong to the model's own tokens, so this page shows every word "
                  "piece and special token whatever the sidebar's token options say.")
with setup:
    left, right = st.columns(2)
    with left:
        layer = index_slider("Layer", attention.num_layers, "arith_layer")
    with right:
        head = index_slider("Head", attention.num_heads, "arith_head")
positions = list(range(len(tokens)))
many = len(tokens) > MAX_LISTED_TOKENS
if many:  # thousands of tokens: a position, not a list to scroll
    if not isinstance(st.session_state.get("arith_position"), int) or \
            not 0 <= st.session_state["arith_position"] < len(tokens):
        st.session_state["arith_position"] = len(tokens) - 1
    query = int(setup.number_input(f"Query position (0–{len(tokens) - 1})", 0, len(tokens) - 1,
                                   key="arith_position"))
else:
    if st.session_state.get("arith_query") not in positions:
        st.session_state["arith_query"] = min(1, len(tokens) - 1)
    query = setup.selectbox("Query token", positions, key="arith_query",
                            format_func=lambda i: f"#{i} {words[i]}")
with picture, st.spinner(f"Computing row {query} of layer {layer}…"):
    row = row_arithmetic_from_rows(attention.rows(layer, range(query, query + 1)), head, query)
setup.caption(f"{inputs.caption(attention)} · d_k = {row.query.shape[-1]} · query #{query} "
              f"'{words[query]}'")
candidates = positions
if special_positions:
    specials = sorted({tokens[i] for i in special_positions})
    if setup.checkbox(f"Leave {' and '.join(specials)} out of the bars", key="arith_no_special"):
        special = set(special_positions)
        candidates = [i for i in positions if i not in special] or positions
        setup.caption(f"The bars leave out {' and '.join(specials)}, but the softmax is still "
                      "the model's, over every key it used: the weights shown no longer add up "
                      "to 1.")
shown_keys = None if candidates is positions else candidates
if len(candidates) > SHOWN_KEYS:
    shown_keys = strongest_keys(row.weights, candidates, SHOWN_KEYS)
    setup.caption(f"Over {len(tokens):,} keys the bars show the {SHOWN_KEYS} with the largest "
                  "weights, in order of position; the table lists every key.")
setup.latex(r"\begin{aligned}\text{scores} &= q\,K^\top / \sqrt{d_k} + \text{mask} \\ "
            r"\text{weights} &= \operatorname{softmax}(\text{scores}) \\ "
            r"\text{output} &= \textstyle\sum_j \text{weight}_j v_j\end{aligned}")
setup.markdown(
    "Its attention row takes four steps: the dot product of its query vector with every key "
    "vector, a division by √d_k so the numbers do not grow with the vector size, the mask (keys "
    "the query may not see), and a softmax that turns the scores into weights adding up to 1. "
    "The head's output for this token is the weighted sum of the value vectors. Every vector "
    "here is read from the running model, not recomputed from a copy."
)
if row.rotary:
    setup.info("This model encodes positions by rotating q and k (rotary position embeddings): "
               "the vectors below are q and k after that rotation, the ones the model "
               "multiplied, so q · k already depends on how far apart the two tokens are.")
if row.kv_group > 1:
    setup.info(f"Grouped-query attention: {row.kv_group} query heads share each key/value head. "
               f"Query head {head} reads key/value head {row.kv_head} (heads "
               f"{row.kv_head * row.kv_group}–{(row.kv_head + 1) * row.kv_group - 1} share it).")
show(row_steps_figure(row, tokens, shown_keys), key="arith_steps", container=picture)
st.subheader("The numbers")
st.dataframe(row_table(row, tokens), hide_index=True, key="arith_table",
             column_config={"softmax weight": st.column_config.ProgressColumn(
                 "softmax weight", min_value=0.0, max_value=1.0, format="%.4f")})
st.success(
    f"Check: the weighted sum of the value vectors shown here matches the model's own output "
    f"for this head and token to within {output_check(row):.1e}, and the softmax row is the "
    "row the attention maps show."
)
st.subheader("Inside one q · k")
st.markdown(
    "A dot product is a sum over the dimensions: q · k = Σ_d q_d k_d. Pick a key to see the "
    f"{row.query.shape[-1]} products q_d × k_d behind its bar in step 1 (bertviz's neuron "
    "view shows the same). Dimensions where q and k have the same sign push the score up, "
    "the others pull it down; a few large products often decide it."
)
choices = positions if shown_keys is None or not many else shown_keys
if st.session_state.get("arith_key") not in choices:
    st.session_state["arith_key"] = int(max(choices, key=lambda i: row.weights[i]))
key = st.selectbox("Key token", choices, key="arith_key",
                   format_func=lambda i: f"#{i} {words[i]}")
parts = key_products(row, key)
show(products_figure(parts, tokens, query), key="arith_products")
st.success(f"Check: the {len(parts.products)} products add up to {parts.total:.6f}, and step "
           f"1's q · k for this key is {parts.dot:.6f} (difference {parts.difference:.1e}).")
st.subheader("The vectors")
show(vectors_figure(row, tokens, shown_keys if many else None), key="arith_vectors")
