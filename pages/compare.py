import streamlit as st

from models.analysis.compare import compare_heads, ranking_measure
from models.errors import ModelLoadError
from ui import cache, charts, long_compare, long_inputs, long_views
from ui.routing import through_app
from ui.state import loaded_source, sidebar_input
from ui.text import plain
from viz.compare import difference_heatmap, side_by_side

SECOND_DEFAULT = "Fruit flies like a banana."  # the other half of the chapter's pair
ROLE_MEASURE = ("Heads are ranked by the difference of their roles: the Jensen-Shannon "
                "divergence (in bits, 0 to 1) between how much weight each puts on the first "
                "token, other special tokens, itself, the previous token, the next token, and "
                "other earlier or later tokens. (A position-by-position comparison would need "
                "both inputs' full maps at once.)")

through_app()

st.title("Compare two inputs")
st.markdown(
    "Run two sentences through the same model (the one chosen in the sidebar) and find the "
    "heads that attend most differently. In *time flies like an arrow* 'flies' is a verb; in "
    "*fruit flies like a banana* it is a noun: which heads notice?"
)
given = sidebar_input()
first_text = given.text
second_text = given.pair or SECOND_DEFAULT
if given.pair:
    st.caption("First input: the sidebar's sentence. Second input: the sidebar's second "
               "sentence, run on its own here rather than as a pair.")
else:
    st.caption(f"First input: the sidebar's sentence. Second input: \"{SECOND_DEFAULT}\"; type a "
               "second sentence in the sidebar to compare with your own.")
if not first_text.strip():
    st.info("Type a sentence in the sidebar to compare.")
    st.stop()
longs = [long_inputs.long_count(given.source, text, "") for text in (first_text, second_text)]
longest = max((count for count in longs if count is not None), default=None,
              key=lambda count: count.tokens)
read_all = longest is not None and st.toggle(**long_views.read_all_text(longest),
                                             key="compare_long")
try:
    loaded_source(given.source)
    if read_all:
        first_side, second_side = (long_compare.side(given.source, text, count is not None)
                                   for text, count in zip((first_text, second_text), longs))
    else:
        first_view, second_view = (
            cache.token_view(given.source, text, "", given.merge_words, given.hide_special)
            for text in (first_text, second_text)
        )
except (ModelLoadError, ValueError) as error:
    st.error(plain(str(error)))
    st.stop()
if read_all:
    table = long_compare.role_table(first_side, second_side)
    st.caption(f"{long_inputs.label(given.source)} · {first_side.num_tokens:,} and "
               f"{second_side.num_tokens:,} tokens, each read whole. {ROLE_MEASURE}")
else:
    for note in dict.fromkeys(first_view.notes + second_view.notes):
        st.info(note)
    table = compare_heads(first_view.record, second_view.record)
    st.caption(f"{first_view.record.source} · "
               f"{ranking_measure(first_view.record, second_view.record)}")
st.dataframe(table, key="compare_table", hide_index=True, column_config={
    "difference": st.column_config.ProgressColumn(
        "difference", help="bits, 0 = same, 1 = nothing in common", format="%.3f",
        min_value=0.0, max_value=1.0),
    "role_jsd": st.column_config.NumberColumn("role_jsd", format="%.3f",
                                              help="difference of what kind of token it looks at"),
    "aligned_jsd": st.column_config.NumberColumn("aligned_jsd", format="%.3f",
                                                 help="difference position by position"),
})
charts.show(difference_heatmap(table), key="compare_grid")
rows = {f"{row.layer}-{row.head}": row  # "layer-head", so the choice can go into a link
        for row in table.itertuples()}
# The labels name the head only: a label that carried its difference would change with the
# input while the choice stays, and the browser may keep showing the old one.
chosen = st.selectbox("Head to compare (most different first)", list(rows),
                      format_func=lambda key: f"layer {rows[key].layer} · head {rows[key].head}",
                      key="compare_head")
picked = rows[chosen]
layer, head = int(picked.layer), int(picked.head)
st.caption(f"Difference {picked.difference:.3f} bits: rank {picked.rank} of {len(rows)} heads.")
left, right = st.columns(2)
if read_all:
    first_figure, second_figure = (
        long_compare.head_figure(given.source, one, name, layer, head)
        for one, name in ((first_side, "First input"), (second_side, "Second input")))
else:
    first_figure, second_figure = side_by_side(first_view.record, second_view.record, layer,
                                               head)
charts.show(first_figure, key="compare_first_map", container=left)
charts.show(second_figure, key="compare_second_map", container=right)
