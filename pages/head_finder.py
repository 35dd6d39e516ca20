import streamlit as st

from models.limits import MAX_TEXT_CHARS
from models.analysis.head_finder import (TokenNotFound, every_position, find_spans, locate,
                                         parse_token_list, rows_to_keys, strongest_in_rows)
from ui import attention as inputs
from ui import charts, views
from ui.analysis_cache import open_head_buttons
from ui.examples import MARIO
from ui.routing import through_app
from ui.text import plain
from viz.head_analysis import layer_head_map, ranking_table
from viz.labels import display_tokens

OPEN_BUTTONS = 3
LISTED_KEYS = 12  # keys named in the caption; the rest are counted

through_app()

st.title("Head finder")
st.markdown(
    "Which head links one word to another? Type a **query** token and one or more **key** "
    "tokens from the sentence (every occurrence of a key counts): every head of every layer is ranked by how much of the query's "
    "attention goes to those keys (0 = none, 1 = all of it). A word split into pieces reads "
    "the mean of its pieces' rows and the sum of their columns, as in the merged view."
)
def _use_example() -> None:
    """The chapter's sentence in the sidebar, its pronoun and name in the boxes."""
    st.session_state.update({"sb_text": MARIO, "sb_pair": "", "finder_query": "he",
                             "finder_keys": "Mario"})


attention = inputs.current()
if attention is None:
    st.stop()
tokens = attention.tokens
specials = set(attention.special_positions)  # [CLS], <|endoftext|>: not words to ask about
words = [word.strip() for position, word in enumerate(display_tokens(tokens))  # to suggest
         if position not in specials and any(c.isalnum() for c in word)]
left, right = st.columns(2)
query_text = left.text_input("Query token", key="finder_query",
                             placeholder=words[-1] if words else "", max_chars=MAX_TEXT_CHARS)
keys_text = right.text_input("Key tokens (separate several with commas)", key="finder_keys",
                             placeholder=words[0] if words else "", max_chars=MAX_TEXT_CHARS)
key_words = parse_token_list(keys_text)
if not query_text.strip() or not key_words:
    st.info(plain("Type a query token and at least one key token from the sentence"
                  + (f": in this one, for instance, '{words[-1]}' as the query and "
                     f"'{words[0]}' as the key." if len(words) > 1 else ".")))
    st.button(f"Try the chapter's example: “{MARIO}”, 'he' → 'Mario'", key="finder_mario",
              icon=":material/lightbulb:", on_click=_use_example)
    st.stop()
try:
    query = locate(attention, query_text)
    key_positions = every_position(attention, key_words)
except TokenNotFound as error:
    st.error(plain(str(error)))
    st.stop()
rows = views.with_progress(  # (L, H, W, K): the query's rows of every layer
    "Computing the query's rows in every layer",
    lambda progress: attention.rows_every_layer(range(query.start, query.stop), progress))
scores, strongest = rows_to_keys(rows, key_positions), strongest_in_rows(rows)
words = display_tokens(tokens)  # tokens as words (no byte-level markers)
table = ranking_table(scores, [[words[k] for k in row] for row in strongest])
occurrences = len(find_spans(tokens, query_text))
listed = key_positions[:LISTED_KEYS]
st.caption(plain(
    f"Query: '{' '.join(words[p] for p in query.positions)}' at position "
    f"{query.start}" + (f" (the first of {occurrences})" if occurrences > 1 else "") +
    f". Keys: {', '.join(f'{words[p]} #{p}' for p in listed)}"
    + (f", … ({len(key_positions):,} positions in all)" if len(listed) < len(key_positions)
       else "") + f". {attention.num_layers * attention.num_heads} heads · "
    + inputs.caption(attention) + "."
))
if occurrences > 1:
    st.info(plain(f"'{query_text.strip()}' occurs {occurrences:,} times in these "
                  f"{len(tokens):,} tokens: the query is its first occurrence (position "
                  f"{query.start}); to ask about a later one, type a word that occurs only "
                  "there."))
if attention.causal and all(p > query.stop - 1 for p in key_positions):
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
