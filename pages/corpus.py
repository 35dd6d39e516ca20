import streamlit as st

from models.corpus.columns import MEASURE_HELP, MEASURES
from models.corpus.layout import methods
from models.limits import CORPUS_UPLOAD_MIB, MODEL_NAME_CHARS
from ui import charts, corpus_cache
from ui.routing import through_app
from ui.state import index_slider
from ui.text import plain
from viz.corpus import HEAD_COLOURINGS, POINT_COLOURINGS, heads_layout_figure, measure_map, \
    points_figure

through_app()

SHIPPED, UPLOAD, FOLDER = "The shipped corpus", "Upload a corpus", "A folder from the command line"

st.title("Corpus: every head over many passages")
intro, picture = st.columns([1, 2], gap="medium")  # the explanation beside the main figure
intro.markdown(
    "One sentence shows what a head did once; what a head *does* shows over many passages "
    "(Clark et al. 2019, *What Does BERT Look At?*). Every head is measured on every passage "
    "with the same statistics and detectors as the other pages, then averaged.")
# The map's own choice first, under the introduction, where a projector's first screen shows it
# beside the map; the corpus it reads below it.
measure_slot = intro.container()
source = intro.radio(
    "Corpus", (SHIPPED, UPLOAD, FOLDER), key="corpus_source",
    help="The command line runs the same job on any corpus, in this process or on a Ray "
         "cluster: `attention-explorer corpus passages.txt --out DIR`; open its folder here.")
result = None
if source == SHIPPED:
    result = corpus_cache.default_result()
elif source == UPLOAD:
    upload = intro.file_uploader(corpus_cache.upload_label(),
                                 type=["txt", "csv", "jsonl", "parquet"], key="corpus_upload",
                                 max_upload_size=CORPUS_UPLOAD_MIB)
    if upload is not None:
        result = corpus_cache.uploaded_result(upload.name, upload.getvalue())
else:
    folder = intro.text_input("The output folder of attention-explorer corpus",
                              key="corpus_folder", max_chars=MODEL_NAME_CHARS,
                              placeholder="/path/to/DIR")
    if folder.strip():
        result = corpus_cache.folder_result(folder)

if result is not None:
    corpus = result.summary["corpus"]
    cut = (f" {corpus['truncated_passages']:,} passages were cut to {corpus['token_limit']} "
           "tokens." if corpus["truncated_passages"] else "")
    intro.caption(f"{plain(result.corpus_name)}: {corpus['passages']:,} passages, "
                  f"{corpus['tokens']:,} tokens · {plain(result.model_label)} · written "
                  f"{corpus_cache.timestamp(result)}.{cut}")
    shape = result.shape

    measure = measure_slot.selectbox("Measure", MEASURES, key="corpus_measure",
                                     help="Each cell is one head's mean over the passages; hover "
                                          "for its standard deviation.")
    measure_slot.caption(MEASURE_HELP[measure])
    charts.show(measure_map(result.heads, measure), key="corpus_map", container=picture)

    st.subheader("Heads that attend alike")
    left, right = st.columns([1, 2], gap="medium")
    colour = left.radio("Colour the heads by", HEAD_COLOURINGS, key="corpus_head_colour")
    left.caption(f"Two heads are close when their attention rows over the same tokens are alike "
                 f"(Jensen–Shannon distance, averaged over "
                 f"{result.summary['distance_passages']:,} passages), placed by MDS. A head's "
                 "label is read from its corpus means, by the rules of *Head statistics*.")
    charts.show(heads_layout_figure(corpus_cache.heads_plane(result), result.heads, colour),
                key="corpus_heads", container=right)

    st.subheader("One head's passages")
    left, right = st.columns(2, gap="medium")
    layer = index_slider("Layer", shape.layers, "corpus_layer", left)
    head = index_slider("Head", shape.heads, "corpus_head", right)
    picks = result.picks(layer, head, measure)
    st.caption(f"{measure} of layer {layer}, head {head}: mean {picks.mean:.3f}. Open a passage "
               "to see this head on it in *Attention maps*.")
    for title, table in (("Most typical (closest to the mean)", picks.typical),
                         ("Highest", picks.highest), ("Lowest", picks.lowest)):
        shown = table.assign(open=[corpus_cache.maps_link(result, text, pair, layer, head)
                                   for text, pair in zip(table["text"], table["text_pair"])])
        st.markdown(f"**{title}**")
        st.dataframe(shown[["passage", measure, "tokens", "open", "text"]], hide_index=True,
                     key=f"corpus_table_{title.split()[0].lower()}", column_config={
                         "open": st.column_config.LinkColumn("open", display_text="Attention maps"),
                         measure: st.column_config.NumberColumn(measure, format="%.3f")})

    st.subheader("Its queries and keys")
    left, right = st.columns([1, 2], gap="medium")
    method = left.radio("Layout", methods(), key="corpus_method",
                        help="PCA always; UMAP when umap-learn is installed.")
    points_colour = left.radio("Colour the points by", POINT_COLOURINGS, key="corpus_point_colour")
    left.caption(f"{result.summary['embedded_tokens']:,} sampled tokens, each as a query and as "
                 "a key of this head. The keys are moved onto the queries' mean and both scaled "
                 "to one length, which leaves the attention unchanged (AttentionViz).")
    points = result.head_points(layer, head)
    charts.show(points_figure(corpus_cache.points_plane(result, layer, head, method),
                              points.token, points.passage, points.position, layer, head,
                              points_colour), key="corpus_points", container=right)
