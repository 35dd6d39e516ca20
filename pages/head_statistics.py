import streamlit as st

from ui import analysis_cache, charts
from ui.routing import through_app
from ui.state import current_record, sidebar_input
from viz.heatmap import attention_heatmap
from viz.statistics import (COLUMN_HELP, LABEL_RULES, NORM_COLUMN_HELP, NORM_COLUMNS,
                            NUMERIC_COLUMNS, head_statistics, statistic_heatmap, statistics_csv,
                            with_norm_columns)

through_app()

st.title("Head statistics")
intro, picture = st.columns([1, 2], gap="medium")  # the controls beside the map they drive
intro.markdown(
    "Clark et al. (2019, *What Does BERT Look At?*) found that many heads follow simple "
    "patterns: look at the previous token, look at [SEP], spread out evenly. Each row of the "
    "table is one head, measured on the sentence in the sidebar. Every number is averaged over "
    "the head's query rows; entropy is in **bits** (0 = all weight on one token). Click a column "
    "heading to sort, and select a row (below) to open that head."
)
record = current_record()
if record is not None:
    table = head_statistics(record)
    given = sidebar_input()
    columns = NUMERIC_COLUMNS
    help_texts = dict(COLUMN_HELP)
    if record.tokens == analysis_cache.model_tokens(given.source, given.text, given.pair):
        norms = analysis_cache.norm_maps(given.source, given.text, given.pair)
        table = with_norm_columns(table, record, norms)
        columns = NUMERIC_COLUMNS + NORM_COLUMNS
        help_texts.update(NORM_COLUMN_HELP)
    else:
        st.caption("The norm-based columns need the model's own tokens: switch the sidebar's "
                   "token options off to see them.")
    column = intro.selectbox("Colour the layer × head map by", columns, key="stats_column",
                             help="Each cell is one head; hover for its value.")
    intro.caption(help_texts[column])
    charts.show(statistic_heatmap(table, column), key="stats_grid", container=picture)
    st.caption(f"{record.num_layers} layers × {record.num_heads} heads · "
               f"{record.num_tokens} tokens · {record.source}. {LABEL_RULES}")
    event = st.dataframe(
        table, key="stats_table", on_select="rerun", selection_mode="single-row",
        hide_index=True, column_config={
            name: st.column_config.NumberColumn(name, help=help_texts[name], format="%.3f")
            for name in columns
        },
    )
    st.download_button("Download the table as CSV", statistics_csv(table), key="stats_csv",
                       file_name="head_statistics.csv", mime="text/csv")
    rows = [row for row in event.selection.rows if 0 <= row < len(table)]
    if rows:
        chosen = table.iloc[rows[0]]
        st.subheader(f"Layer {chosen['layer']} · head {chosen['head']}: {chosen['label']}")
        charts.show(attention_heatmap(record, int(chosen["layer"]), int(chosen["head"])),
                    key="stats_head")
    else:
        st.caption("Select a row in the table to open that head here.")
