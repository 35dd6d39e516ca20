import streamlit as st

from ui import attention as inputs
from ui import cache, views
from ui.downloads import bertviz_downloads
from ui.routing import through_app
from viz.export import safe_stem
from viz.export_figures import title_for
from viz.bertviz_views import (BERTVIZ_COLOURS, HEAD_VIEW, MAX_TOKENS, MODEL_VIEW, WINDOW_TOKENS,
                               WEIGHT_DECIMALS, ViewChoice, default_model_choice, fits, max_tokens)

through_app()

VIEW_LABELS = {HEAD_VIEW: "Head view", MODEL_VIEW: "Model view"}
# The radio is drawn only when there is a record, and Streamlit forgets a widget's value on a run
# that does not draw it: the choice is kept here too, so an empty sentence does not reset it.
VIEW_CHOICE = "bertviz_view_choice"
# The input (tokens, layers, heads, pair) the model view's layers and heads were last chosen for.
CHOSEN_FOR = "bertviz_chosen_for"
LAYERS, HEADS = "bertviz_layers", "bertviz_heads"


def model_view_choice(record) -> ViewChoice | None:
    """The model view's layers and heads, from two multiselects. They start (and start again when
    the input changes and the old choice no longer fits) with as many as bertviz draws quickly."""
    default = default_model_choice(record)
    shape = (record.num_tokens, record.num_layers, record.num_heads, record.is_pair)
    for key, count, chosen in ((LAYERS, record.num_layers, default.layers),
                               (HEADS, record.num_heads, default.heads)):
        stored = st.session_state.get(key)
        if not isinstance(stored, list) or any(not 0 <= i < count for i in stored):
            st.session_state[key] = list(range(count) if chosen is None else chosen)
    if st.session_state.get(CHOSEN_FOR) != shape:
        current = ViewChoice(MODEL_VIEW, st.session_state[LAYERS] or None,
                             st.session_state[HEADS] or None)
        if CHOSEN_FOR in st.session_state and not fits(record, current):
            st.session_state[LAYERS] = list(range(record.num_layers) if default.layers is None
                                            else default.layers)
            st.session_state[HEADS] = list(range(record.num_heads) if default.heads is None
                                           else default.heads)
        st.session_state[CHOSEN_FOR] = shape
    left, right = st.columns(2)
    layers = left.multiselect("Layers", list(range(record.num_layers)), key="bertviz_layers")
    heads = right.multiselect("Heads", list(range(record.num_heads)), key="bertviz_heads")
    if not layers or not heads:
        st.info("Choose at least one layer and one head to draw.")
        return None
    if default != ViewChoice(MODEL_VIEW) and record.num_tokens <= MAX_TOKENS:
        st.caption(f"At {record.num_tokens} tokens bertviz draws about "
                   f"{default.layer_count(record) * default.head_count(record)} thumbnails "
                   "quickly, so the view starts with those; add or remove layers and heads above.")
    return ViewChoice(MODEL_VIEW, tuple(layers), tuple(heads))


st.title("bertviz views")
st.markdown(
    "[bertviz](https://github.com/jessevig/bertviz) is the classic way to look at a transformer's "
    "attention. With a second sentence, its *Attention* menu filters A→A, B→B, A→B and "
    "B→A. Everything here runs from this app's server: nothing is fetched from the internet."
)
attention = inputs.current()
record = None
if attention is not None and attention.num_tokens <= MAX_TOKENS:
    record = attention.window(0, attention.num_tokens)
elif attention is not None:  # a window of it, every layer exact inside the window
    last = attention.num_tokens - WINDOW_TOKENS
    start = views.window_start("Window: first token", last, "bertviz_window_start", last, st)
    record = views.with_progress("Computing the window in every layer",
                                 lambda progress: attention.window(start, start + WINDOW_TOKENS,
                                                                   progress))
    st.caption(f"Tokens {start}–{start + record.num_tokens - 1} of "
               f"{inputs.caption(attention)}. bertviz draws {WINDOW_TOKENS} tokens at a time; the "
               "lines are the model's exact weights between tokens inside the window; what a "
               "token gives to tokens outside it (often the first token) is not drawn, so its "
               "lines add up to less than 1.")
if record is not None:
    if "bertviz_view" not in st.session_state:
        st.session_state["bertviz_view"] = st.session_state.get(VIEW_CHOICE, HEAD_VIEW)
    view = st.radio("View", list(VIEW_LABELS), format_func=VIEW_LABELS.get, horizontal=True,
                    key="bertviz_view")
    st.session_state[VIEW_CHOICE] = view
    if view == HEAD_VIEW:
        st.markdown(
            "One layer at a time (bertviz's *Layer* menu). A line joins a token on the left to a "
            "token on the right; its strength is the attention weight and its colour the head. "
            "The number on each colour square is its head"
            + (f" (bertviz has {BERTVIZ_COLOURS} colours, so heads {BERTVIZ_COLOURS} and up "
               "reuse them from head 0)" if record.num_heads > BERTVIZ_COLOURS else "")
            + ". **Click** a square to hide or show that head. **Double-click** a square to "
            "show only that head; double-click it again to bring back every head. **Hover** a "
            "token to see only its lines, with their weights as boxes on the other side."
        )
        choice = ViewChoice(HEAD_VIEW)
    else:
        st.markdown(
            "A thumbnail for every layer (rows) and head (columns) chosen below. **Click** a "
            "thumbnail to draw it large beside the grid; click it again to close it. In the large "
            "one, **hover** a token on the left to see only its lines. The drawing is scaled to "
            "the width of the page."
        )
        choice = model_view_choice(record)
    if choice is not None:
        limit = max_tokens(record, choice)
        if record.num_tokens > limit:
            chosen = ("" if choice.kind == HEAD_VIEW else
                      f" with {choice.layer_count(record)} layers × {choice.head_count(record)} "
                      "heads")
            fewer = ("" if limit >= MAX_TOKENS or choice.kind == HEAD_VIEW else
                     " Choose fewer layers or heads, or")
            st.info(
                f"This input has {record.num_tokens} tokens. bertviz's "
                f"{VIEW_LABELS[view].lower()} draws a line for every pair of tokens in every "
                f"head, and for this model{chosen} it stays responsive up to {limit} tokens."
                + (fewer + " use" if fewer else " Use")
                + " the **All heads at once** page for longer inputs: it shows every layer and "
                "head at any length."
            )
        else:
            st.caption(f"{record.num_tokens} tokens · {record.source} · weights rounded to "
                       f"{WEIGHT_DECIMALS} decimals")
            page = cache.bertviz_html(record, choice)
            st.iframe(page, height="content",
                      alt=f"bertviz {VIEW_LABELS[view].lower()} of the attention")
            bertviz_downloads(page, title_for(f"bertviz {choice.kind} view", record.tokens),
                              f"{safe_stem(record.source)}_bertviz_{choice.kind}", "bertviz_dl")
