import streamlit as st

from ui import cache
from ui.routing import through_app
from ui.state import current_record
from viz.bertviz_views import HEAD_VIEW, MODEL_VIEW, WEIGHT_DECIMALS, max_tokens

through_app()

VIEW_LABELS = {HEAD_VIEW: "Head view", MODEL_VIEW: "Model view"}
# The radio is drawn only when there is a record, and Streamlit forgets a widget's value on a run
# that does not draw it: the choice is kept here too, so an empty sentence does not reset it.
VIEW_CHOICE = "bertviz_view_choice"


st.title("bertviz views")
st.markdown(
    "[bertviz](https://github.com/jessevig/bertviz) is the classic way to look at a transformer's "
    "attention. In the **head view**, each token on the left is joined to every token on the "
    "right by a line whose strength is the attention weight; each colour is one head (click the "
    "coloured squares to switch heads, hover a token to follow only its lines). The **model view** "
    "draws every layer and head at once as thumbnails; click one to enlarge it. With a second "
    "sentence, the *Attention* menu filters A→A, B→B, A→B and B→A. Everything here runs "
    "from this app's server: nothing is fetched from the internet."
)
record = current_record()
if record is not None:
    if "bertviz_view" not in st.session_state:
        st.session_state["bertviz_view"] = st.session_state.get(VIEW_CHOICE, HEAD_VIEW)
    view = st.radio("View", list(VIEW_LABELS), format_func=VIEW_LABELS.get, horizontal=True,
                    key="bertviz_view")
    st.session_state[VIEW_CHOICE] = view
    limit = max_tokens(record, view)
    if record.num_tokens > limit:
        st.info(
            f"This input has {record.num_tokens} tokens. bertviz's {VIEW_LABELS[view].lower()} "
            f"draws a line for every pair of tokens in every head, and for this model it stays "
            f"responsive up to {limit} tokens. Use the **All heads at once** page for longer "
            "inputs: it shows every layer and head at any length."
        )
    else:
        st.caption(f"{record.num_tokens} tokens · {record.source} · weights rounded to "
                   f"{WEIGHT_DECIMALS} decimals")
        st.iframe(cache.bertviz_html(record, view), height="content",
                  alt=f"bertviz {VIEW_LABELS[view].lower()} of the attention")
