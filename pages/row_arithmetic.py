import streamlit as st

from models.arithmetic import ArithmeticUnavailable, row_arithmetic
from ui import cache
from ui.routing import through_app
from ui.state import current_choice, current_record, index_slider
from viz.arithmetic import output_check, row_steps_figure, row_table, vectors_figure

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
record = current_record(apply_options=False)
if record is not None:
    if st.session_state.get("sb_merge_words") or st.session_state.get("sb_hide_special"):
        st.caption("Vectors belong to the model's own tokens, so this page shows every word "
                   "piece and special token whatever the sidebar's token options say.")
    choice = current_choice()
    try:
        projections = cache.projections(*choice.key)
    except ArithmeticUnavailable as error:
        st.info(f"This view is not available for the current model: {error}.")
        st.stop()
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
    row = row_arithmetic(projections, layer, head, query)
    st.caption(f"{record.source} · d_k = {row.query.shape[-1]} · query #{query} "
               f"'{record.tokens[query]}'")
    st.plotly_chart(row_steps_figure(row, record.tokens), key="arith_steps")
    st.subheader("The numbers")
    st.dataframe(row_table(row, record.tokens), hide_index=True, key="arith_table",
                 column_config={"softmax weight": st.column_config.ProgressColumn(
                     "softmax weight", min_value=0.0, max_value=1.0, format="%.4f")})
    st.success(
        f"Check: the weighted sum of the value vectors shown here matches the model's own output "
        f"for this head and token to within {output_check(row):.1e}, and the softmax row is the "
        "row the attention maps show."
    )
    st.subheader("The vectors")
    st.plotly_chart(vectors_figure(row, record.tokens), key="arith_vectors")
