import streamlit as st

from models.errors import ModelLoadError
from ui import cache, charts
from ui.routing import through_app
from ui.state import loaded_source, sidebar_input
from ui.text import plain
from viz.compare import compare_heads, difference_heatmap, ranking_measure, side_by_side

SECOND_DEFAULT = "Fruit flies like a banana."  # the other half of the chapter's pair

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
try:
    loaded_source(given.source)
    first_view, second_view = (
        cache.token_view(given.source, text, "", given.merge_words, given.hide_special)
        for text in (first_text, second_text)
    )
except (ModelLoadError, ValueError) as error:
    st.error(plain(str(error)))
    st.stop()
for note in dict.fromkeys(first_view.notes + second_view.notes):
    st.info(note)
table = compare_heads(first_view.record, second_view.record)
st.caption(f"{first_view.record.source} · {ranking_measure(first_view.record, second_view.record)}")
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
labels = {f"{row.layer}-{row.head}":  # "layer-head", so the choice can go into a link
          f"layer {row.layer} · head {row.head} (difference {row.difference:.3f})"
          for row in table.itertuples()}
chosen = st.selectbox("Head to compare (most different first)", list(labels),
                      format_func=labels.get, key="compare_head")
layer, head = (int(number) for number in chosen.split("-"))
left, right = st.columns(2)
first_figure, second_figure = side_by_side(first_view.record, second_view.record, layer, head)
charts.show(first_figure, key="compare_first_map", container=left)
charts.show(second_figure, key="compare_second_map", container=right)
