import streamlit as st

from ui import attention as inputs
from ui import charts, views
from ui.downloads import figure_downloads
from ui.routing import through_app
from models.analysis.norm_shares import NORM_COLUMN_HELP, NORM_COLUMNS
from models.analysis.statistics import COLUMN_HELP, LABEL_RULES, NUMERIC_COLUMNS
from viz.export import safe_stem
from viz.export_figures import title_for
from viz.statistics import statistic_heatmap, statistics_csv

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
attention = inputs.current()
if attention is not None:
    table = attention.summary().statistics
    columns = NUMERIC_COLUMNS + tuple(name for name in NORM_COLUMNS if name in table)
    help_texts = {**COLUMN_HELP, **NORM_COLUMN_HELP}
    if not set(NORM_COLUMNS) <= set(table):
        intro.caption("The norm-based columns (‖α·f(x)‖) need the model's own tokens: switch the "
                      "sidebar's token options off to see them.")
    empty = [name for name in ("cls", "sep", *NORM_COLUMNS)  # softmax weights are never 0
             if name in table and not table[name].any()]
    if empty:
        named = " and ".join([", ".join(empty[:-1]), empty[-1]] if len(empty) > 1 else empty)
        intro.caption(f"There is no special token among the tokens shown, so the {named} "
                      "columns are 0 for every head.")
    column = intro.selectbox("Colour the layer × head map by", columns, key="stats_column",
                             help="Each cell is one head; hover for its value.")
    intro.caption(help_texts[column])
    grid = statistic_heatmap(table, column)
    charts.show(grid, key="stats_grid", container=picture)
    figure_downloads(grid, title_for(f"Head statistics ({column})", attention.tokens),
                     f"{safe_stem(attention.label)}_{column}", "stats_figure")
    st.caption(f"{attention.num_layers} layers × {attention.num_heads} heads · "
               f"{inputs.caption(attention)}. {LABEL_RULES}")
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
        views.head_map(attention, int(chosen["layer"]), int(chosen["head"]), "stats")
    else:
        st.caption("Select a row in the table to open that head here.")
