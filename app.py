"""Attention Explorer: navigation and the sidebar shared by every page."""

import logging
from pathlib import Path

import models.limits  # noqa: F401  (reading the budgets reads the configuration, torch not yet)
from models.threads import configure_server_threads

configure_server_threads()  # before torch loads: one forward per core, waiting passively

import streamlit as st  # noqa: E402

from models.loading.hub import stay_offline_unless_allowed
from models.settings import ConfigError, check

try:  # a wrong attention-explorer.toml or ATTENTION_EXPLORER_* value: one sentence, no app
    check()
except ConfigError as error:
    st.error(f"The configuration is wrong: {error}")
    st.stop()
stay_offline_unless_allowed()  # HF_HUB_OFFLINE=1 unless ATTENTION_EXPLORER_HUB=on

from ui.serving import import_engine  # noqa: E402

import_engine()  # one thread at a time (the warm-up and the first sessions start together)

from ui.accessibility import accessible_page  # noqa: E402
from ui.attention import read_setting  # noqa: E402
from ui.decks import deck_slide  # noqa: E402
from ui.examples import examples_menu  # noqa: E402
from ui.links import LinkedView  # noqa: E402
from ui.routing import inside_app  # noqa: E402
from ui.server_limits import warn_if_limits_differ  # noqa: E402
from ui.state import fold_sidebar_when_presenting, sidebar  # noqa: E402
from ui.timing import RunClock  # noqa: E402

run_clock = RunClock.start()  # the run's times go to ATTENTION_EXPLORER_TIMING_LOG when it is set

st.set_page_config(page_title="Attention Explorer", page_icon=str(Path(__file__).parent / "assets" / "icon.png"), layout="wide")
accessible_page()

# Each page starts with ui.routing.through_app(), which keeps Streamlit's legacy pages/ folder
# routing from running a page without this script on a fresh server's first requests (the page
# runs inside_app() below).
MAPS = st.Page("pages/attention_maps.py", title="Attention maps", icon=":material/grid_on:",
               url_path="maps_default", default=True)
page = st.navigation({
    "Explore a model": [
        MAPS,
        # The default page is served at "/", and its own name is not found as a path, so a
        # link typed as /attention_maps?… opens it through this hidden page (see below). The
        # default's url_path only has to differ from it.
        st.Page(lambda: None, title="Attention maps", url_path="attention_maps",
                visibility="hidden"),
        st.Page("pages/all_heads.py", title="All heads at once", icon=":material/apps:"),
        st.Page("pages/predictions.py", title="What the model predicts", icon=":material/lightbulb:"),
        st.Page("pages/bertviz_views.py", title="bertviz views", icon=":material/hub:"),
        st.Page("pages/row_arithmetic.py", title="One row, step by step", icon=":material/calculate:"),
        st.Page("pages/head_statistics.py", title="Head statistics", icon=":material/bar_chart:"),
        st.Page("pages/rollout.py", title="Attention rollout", icon=":material/waves:"),
        st.Page("pages/compare.py", title="Compare two inputs", icon=":material/compare:"),
        st.Page("pages/cross_attention.py", title="Cross-attention (translation)", icon=":material/translate:"),
        st.Page("pages/head_finder.py", title="Head finder", icon=":material/search:"),
        st.Page("pages/head_detectors.py", title="Head detectors", icon=":material/radar:"),
        st.Page("pages/corpus.py", title="Corpus: heads over many passages", icon=":material/library_books:"),
        st.Page("pages/ablation.py", title="Ablation and knockout", icon=":material/block:"),
        st.Page("pages/activation_patching.py", title="Activation patching", icon=":material/swap_horiz:"),
        st.Page("pages/logit_lens.py", title="Logit lens", icon=":material/visibility:"),
        st.Page("pages/logit_attribution.py", title="Direct logit attribution", icon=":material/functions:"),
        st.Page("pages/generation.py", title="Generation, step by step", icon=":material/edit_note:"),
    ],
    "How attention works": [
        st.Page("pages/lessons.py", title="Lessons", icon=":material/school:"),
        st.Page("pages/deck.py", title="Slide decks", icon=":material/slideshow:"),
        st.Page("pages/causal_masks.py", title="Causal and padding masks", icon=":material/change_history:"),
        st.Page("pages/adaptive_span.py", title="Adaptive attention span", icon=":material/width:"),
        st.Page("pages/scaling.py", title="Why attention is scaled", icon=":material/straighten:"),
        st.Page("pages/positions.py", title="Positions", icon=":material/pin_drop:"),
        st.Page("pages/encoder_layer.py", title="Inside one encoder layer", icon=":material/layers:"),
        st.Page("pages/fine_tuning.py", title="Fine-tuning a classifier", icon=":material/model_training:"),
        st.Page("pages/masked_lm.py", title="Masked words (BERT's pretraining)", icon=":material/text_fields:"),
        st.Page("pages/neuron_view.py", title="bertviz neuron view", icon=":material/scatter_plot:"),
        st.Page("pages/attention_cost.py", title="The n² cost of attention", icon=":material/speed:"),
    ],
}, position="top")  # every page in the top bar's two menus; the sidebar starts with the input
if page.url_path == "attention_maps":  # before any widget: the link's values come along
    st.switch_page(MAPS, query_params=st.query_params.to_dict())
warn_if_limits_differ()
view = None
try:  # the link, the sidebar and the page, all inside the one guard
    view = LinkedView.restore(page)  # the URL's view into the session, before any widget exists
    fold_sidebar_when_presenting()
    sidebar(read_setting)
    examples_menu()  # the chapters' examples, one click each
    view.share()  # the session's view into the URL, and "Link to this view" in the sidebar
    with deck_slide(page), inside_app():  # a deck's bar above the page when presenting one
        page.run()
        view.check()  # a note for each value from the link the page could not show
except Exception as error:  # the last guard: log the trace for the operator, show a sentence
    if view is None or not view.retry_without_link(error):
        logging.getLogger("attention_explorer").exception("page %s failed", page.title)
        st.error("Something went wrong while drawing this page. Try another input or model; "
                 "the details are in the server log.")
finally:  # also when Streamlit stops or reruns the script
    run_clock.log(page.title)
