import streamlit as st

from models.head_analysis import (TokenNotFound, every_position, find_spans, locate,
                                  parse_token_list, query_to_keys, strongest_keys)
from ui import charts
from ui.analysis_cache import open_head_buttons
from ui.routing import through_app
from ui.state import current_record
from ui.text import plain
from viz.head_analysis import layer_head_map, ranking_table

OPEN_BUTTONS = 3

through_app()

st.title("Head finder")
st.markdown(
    "Which head links one word to another? Type a **query** token and one or more **key** "
    "tokens from the sentence (every occurrence of a key counts): every head of every layer is ranked by how much of the query's "
    "attention goes to those keys (0 = none, 1 = all of it). A word split into pieces reads "
    "the mean of its pieces' rows and the sum of their columns, as in the merged view."
)
record = current_record()
if record is not None:
    left, right = st.columns(2)
    query_text = left.text_input("Query token", key="finder_query", placeholder="he")
    keys_text = right.text_input("Key tokens (separate several with commas)", key="finder_keys",
                                 placeholder="Mario")
    key_words = parse_token_list(keys_text)
    if not query_text.strip() or not key_words:
        st.info("Type a query token and at least one key token from the sentence: for "
                "'Mario is short, but he can jump super high.' try 'he' and 'Mario'.")
        st.stop()
    try:
        query = locate(record, query_text)
        key_positions = every_position(record, key_words)
    except TokenNotFound as error:
        st.error(plain(str(error)))
        st.stop()
    scores = query_to_keys(record, query.positions, key_positions)
    strongest = strongest_keys(record, query.positions)
    table = ranking_table(scores, [[record.tokens[k] for k in row] for row in strongest])
    occurrences = len(find_spans(record.tokens, query_text))
    st.caption(plain(
        f"Query: '{' '.join(record.tokens[p] for p in query.positions)}' at position "
        f"{query.start}" + (f" (the first of {occurrences})" if occurrences > 1 else "") +
        f". Keys: {', '.join(f'{record.tokens[p]} #{p}' for p in key_positions)}. "
        f"{record.num_layers * record.num_heads} heads · {record.source}."
    ))
    if "causal" in record.masks and all(p > query.stop - 1 for p in key_positions):
        st.warning("Every key comes after the query, and this causal model never attends to "
                   "later tokens, so every head scores 0.")
    best = table.head(OPEN_BUTTONS)
    open_head_buttons([(int(row.layer), int(row.head), f"attention {row.attention:.3f}")
                       for row in best.itertuples()], "finder_open")
    charts.show(layer_head_map(scores, "Attention from the query to the keys, per head",
                               "attention"), key="finder_map")
    st.dataframe(table, hide_index=True, key="finder_table", column_config={
        "attention": st.column_config.NumberColumn("attention", format="%.3f",
                                                   help="Share of the query's attention on the keys.")})
