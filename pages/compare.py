import streamlit as st

from models.hooks.access import compare
from ui import attention as inputs
from ui import charts, views
from ui.routing import through_app
from ui.state import sidebar_input
from viz.compare import difference_heatmap

SECOND_DEFAULT = "Fruit flies like a banana."  # the other half of the chapter's pair

through_app()

st.title("Compare two inputs")
# The inputs beside the map of every head's difference, so it is on a projector's first screen.
setup, picture = st.columns([1, 2], gap="medium")
setup.markdown(
    "Run two sentences through the same model (the one chosen in the sidebar) and find the "
    "heads that attend most differently. In *time flies like an arrow* 'flies' is a verb; in "
    "*fruit flies like a banana* it is a noun: which heads notice?"
)
given = sidebar_input()
first_text = given.text
second_text = given.pair or SECOND_DEFAULT
if given.pair:
    setup.caption("First input: the sidebar's sentence. Second input: the sidebar's second "
                  "sentence, run on its own here rather than as a pair.")
else:
    setup.caption(f"First input: the sidebar's sentence. Second input: \"{SECOND_DEFAULT}\"; "
                  "type a second sentence in the sidebar to compare with your own.")
if not first_text.strip():
    setup.info("Type a sentence in the sidebar to compare.")
    st.stop()
first, second = (inputs.of(given.source, text, "") for text in (first_text, second_text))
if first is None or second is None:
    st.stop()
table, measure = compare(first, second)
setup.caption(f"{first.label} · {first.num_tokens:,} and {second.num_tokens:,} tokens. "
              f"{measure}")
charts.show(difference_heatmap(table), key="compare_grid", container=picture)
st.dataframe(table, key="compare_table", hide_index=True, column_config={
    "difference": st.column_config.ProgressColumn(
        "difference", help="bits, 0 = same, 1 = nothing in common", format="%.3f",
        min_value=0.0, max_value=1.0),
    "role_jsd": st.column_config.NumberColumn("role_jsd", format="%.3f",
                                              help="difference of what kind of token it looks at"),
    "aligned_jsd": st.column_config.NumberColumn("aligned_jsd", format="%.3f",
                                                 help="difference position by position"),
})
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
views.head_map(first, layer, head, "compare_first", left, half_width=True, name="First input")
views.head_map(second, layer, head, "compare_second", right, half_width=True,
               name="Second input")
