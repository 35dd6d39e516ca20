import streamlit as st

from models.pretrained import ModelLoadError
from ui import cache
from ui.routing import through_app
from ui.state import current_choice
from viz.compare import compare_heads, difference_heatmap, ranking_measure, side_by_side

through_app()

st.title("Compare two inputs")
st.markdown(
    "Run two sentences through the same model (the one chosen in the sidebar) and find the "
    "heads that attend most differently. In *time flies like an arrow* 'flies' is a verb; in "
    "*fruit flies like a banana* it is a noun: which heads notice?"
)
first_column, second_column = st.columns(2)
first_text = first_column.text_input("First sentence", "time flies like an arrow",
                                     key="compare_first")
second_text = second_column.text_input("Second sentence", "fruit flies like a banana",
                                       key="compare_second")
choice = current_choice()
merge = bool(st.session_state.get("sb_merge_words"))
hide = bool(st.session_state.get("sb_hide_special"))
if not first_text.strip() or not second_text.strip():
    st.info("Type two sentences to compare.")
    st.stop()
try:
    first_view, second_view = (
        cache.token_view(choice.kind, choice.name, choice.seed, text, "", merge, hide)
        for text in (first_text, second_text)
    )
except (ModelLoadError, ValueError) as error:
    st.error(str(error))
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
st.plotly_chart(difference_heatmap(table), key="compare_grid")
labels = {(int(row.layer), int(row.head)):
          f"layer {row.layer} · head {row.head} (difference {row.difference:.3f})"
          for row in table.itertuples()}
layer, head = st.selectbox("Head to compare (most different first)", list(labels),
                           format_func=labels.get, key="compare_head")
left, right = st.columns(2)
first_figure, second_figure = side_by_side(first_view.record, second_view.record, layer, head)
left.plotly_chart(first_figure, key="compare_first_map")
right.plotly_chart(second_figure, key="compare_second_map")
