import streamlit as st

from models.analysis.norm_shares import NORM_COLUMN_HELP, NORM_COLUMNS, with_norm_columns
from models.analysis.pooling import pool
from models.analysis.statistics import COLUMN_HELP, LABEL_RULES, NUMERIC_COLUMNS, head_statistics
from ui import analysis_cache, charts, long_inputs, long_views
from ui.routing import through_app
from ui.state import current_record, sidebar_input
from viz.heatmap import attention_heatmap
from viz.long_view import pooled_head_figure
from viz.statistics import statistic_heatmap, statistics_csv

through_app()


def statistics_view(table, columns, help_texts: dict, summary: str, open_head, intro,
                    picture) -> None:
    """The column picker (in `intro`), the layer x head map of that column (in `picture`), the
    table, its download, and the selected row's head drawn by `open_head(layer, head)`."""
    column = intro.selectbox("Colour the layer × head map by", columns, key="stats_column",
                             help="Each cell is one head; hover for its value.")
    intro.caption(help_texts[column])
    charts.show(statistic_heatmap(table, column), key="stats_grid", container=picture)
    st.caption(f"{summary} {LABEL_RULES}")
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
        open_head(int(chosen["layer"]), int(chosen["head"]))
    else:
        st.caption("Select a row in the table to open that head here.")


st.title("Head statistics")
intro, picture = st.columns([1, 2], gap="medium")  # the controls beside the map they drive
intro.markdown(
    "Clark et al. (2019, *What Does BERT Look At?*) found that many heads follow simple "
    "patterns: look at the previous token, look at [SEP], spread out evenly. Each row of the "
    "table is one head, measured on the sentence in the sidebar. Every number is averaged over "
    "the head's query rows; entropy is in **bits** (0 = all weight on one token). Click a column "
    "heading to sort, and select a row (below) to open that head."
)
given = sidebar_input()
long = long_inputs.long_count(given.source, given.text, given.pair)
read_all = long is not None and intro.toggle(**long_views.read_all_text(long), key="stats_long")
if read_all:
    measured = long_views.statistics(given.source, given.text, given.pair)
    st.caption("For a long input the norm-based columns (‖α·f(x)‖) are left out: they are not "
               "measured layer by layer. The sidebar's token options do not apply either: every "
               "number is over the model's own tokens.")

    def open_long_head(layer: int, head: int) -> None:
        weights = long_inputs.head(given.source, given.text, given.pair, layer, head)
        charts.show(pooled_head_figure(pool(weights), layer, head), key="stats_long_head")

    statistics_view(measured.table, NUMERIC_COLUMNS, dict(COLUMN_HELP),
                    f"{measured.num_layers} layers × {measured.num_heads} heads · all "
                    f"{measured.num_tokens:,} tokens, "
                    f"read layer by layer · {long_inputs.label(given.source)}.", open_long_head,
                    intro, picture)
else:
    record = current_record()
    if record is not None:
        table = head_statistics(record)
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

        def open_head(layer: int, head: int) -> None:
            charts.show(attention_heatmap(record, layer, head), key="stats_head")

        statistics_view(table, columns, help_texts,
                        f"{record.num_layers} layers × {record.num_heads} heads · "
                        f"{record.num_tokens} tokens · {record.source}.", open_head,
                        intro, picture)
