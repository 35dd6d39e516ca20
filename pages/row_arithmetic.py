import streamlit as st

from models.arithmetic import key_products, row_arithmetic
from ui.charts import show
from ui.routing import through_app
from ui.state import current_trace, index_slider, sidebar_input
from viz.arithmetic import (output_check, products_figure, row_steps_figure, row_table,
                            vectors_figure)

through_app()

st.title("One attention row, step by step")
st.markdown(
    "Pick a layer, a head and one **query** token. Its attention row is computed in four steps: "
    "the dot product of its query vector with every key vector, a division by √d_k so the "
    "numbers do not grow with the vector size, the mask (keys the query may not see), and a "
    "softmax that turns the scores into weights adding up to 1. The head's output for this "
    "token is the weighted sum of the value vectors. Every vector here is read from the running "
    "model, not recomputed from a copy."
)
st.latex(r"\text{weights} = \operatorname{softmax}\!\left(\frac{q\,K^\top}{\sqrt{d_k}} + \text{mask}\right),"
         r"\qquad \text{output} = \textstyle\sum_j \text{weight}_j\, v_j")
trace = current_trace()
if trace is not None:
    record = trace.record
    given = sidebar_input()
    if given.merge_words or given.hide_special:
        st.caption("Vectors belong to the model's own tokens, so this page shows every word "
                   "piece and special token whatever the sidebar's token options say.")
    left, middle, right = st.columns(3)
    with left:
        layer = index_slider("Layer", record.num_layers, "arith_layer")
    with middle:
        head = index_slider("Head", record.num_heads, "arith_head")
    positions = list(range(record.num_tokens))
    if st.session_state.get("arith_query") not in positions:
        st.session_state["arith_query"] = min(1, record.num_tokens - 1)
    query = right.selectbox("Query token", positions, key="arith_query",
                            format_func=lambda i: f"#{i} {record.tokens[i]}")
    row = row_arithmetic(trace, layer, head, query)
    st.caption(f"{record.source} · d_k = {row.query.shape[-1]} · query #{query} "
               f"'{record.tokens[query]}'")
    if row.rotary:
        st.info("This model encodes positions by rotating q and k (rotary position embeddings): "
                "the vectors below are q and k after that rotation, the ones the model "
                "multiplied, so q · k already depends on how far apart the two tokens are.")
    if row.kv_group > 1:
        st.info(f"Grouped-query attention: {row.kv_group} query heads share each key/value head. "
                f"Query head {head} reads key/value head {row.kv_head} (heads "
                f"{row.kv_head * row.kv_group}–{(row.kv_head + 1) * row.kv_group - 1} share it).")
    shown_keys = None
    if record.special_positions:
        specials = sorted({record.tokens[i] for i in record.special_positions})
        if st.checkbox(f"Leave {' and '.join(specials)} out of the bars", key="arith_no_special"):
            special = set(record.special_positions)
            shown_keys = [i for i in positions if i not in special] or None
            st.caption(f"The bars leave out {' and '.join(specials)}, but the softmax is still the "
                       "model's, over every key it used: the weights shown no longer add up to 1.")
    show(row_steps_figure(row, record.tokens, shown_keys), key="arith_steps")
    st.subheader("The numbers")
    st.dataframe(row_table(row, record.tokens), hide_index=True, key="arith_table",
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
    if st.session_state.get("arith_key") not in positions:
        st.session_state["arith_key"] = int(row.weights.argmax())
    key = st.selectbox("Key token", positions, key="arith_key",
                       format_func=lambda i: f"#{i} {record.tokens[i]}")
    parts = key_products(row, key)
    show(products_figure(parts, record.tokens, query), key="arith_products")
    st.success(f"Check: the {len(parts.products)} products add up to {parts.total:.6f}, and step "
               f"1's q · k for this key is {parts.dot:.6f} (difference {parts.difference:.1e}).")
    st.subheader("The vectors")
    show(vectors_figure(row, record.tokens), key="arith_vectors")
