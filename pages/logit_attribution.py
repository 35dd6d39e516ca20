import streamlit as st

from models.limits import MAX_TEXT_CHARS

from models.errors import ModelLoadError
from models.experiments.targets import NoPrediction
from ui import charts, interventions_cache as cached
from ui.examples import IOI_ANSWER, IOI_WRONG
from ui.routing import through_app
from ui.state import sidebar_input, use_decoder
from ui.text import plain
from ui.token_choice import token_pills
from viz.interventions import contribution_bars, shares_map

DEFAULTS = {"dla_answer": IOI_ANSWER, "dla_wrong": IOI_WRONG}


through_app()

st.title("Direct logit attribution")
# The prompt's choices beside the heads' shares, so the map is on a projector's first screen.
setup, picture = st.columns([1, 2], gap="medium")
setup.markdown(
    "In a pre-norm model the residual stream at the end is a sum: the embeddings, then each "
    "head's and each MLP's output. With the final norm's scale frozen at its value, the "
    "logit difference logit(answer) − logit(wrong token) splits into one **direct share** per "
    "part, and the shares add up to it exactly. *Direct* means what a part writes into the "
    "stream the unembedding reads, not what it does through later layers."
)
given = sidebar_input()
for key, value in DEFAULTS.items():
    st.session_state.setdefault(key, value)
try:
    model = cached.loaded(given.source)
except NoPrediction as error:
    picture.info(plain(str(error)))
    picture.button("Use the causal decoder", key="dla_use_decoder", on_click=use_decoder)
    st.stop()
except (ModelLoadError, ValueError) as error:
    picture.error(plain(str(error)))
    st.stop()
if not given.text.strip():
    picture.info("Type a prompt in the sidebar: its last token's prediction is split into parts.")
    st.stop()
try:
    top = cached.top_predictions(given.source, given.text)
except ValueError as error:
    picture.error(plain(str(error)))
    st.stop()
token_pills("The model's top predictions (click: answer)", top, "dla_pick_answer", "dla_answer",
            setup)
token_pills("… (click: wrong token)", top, "dla_pick_wrong", "dla_wrong", setup)
answer = setup.text_input("Answer (one token)", key="dla_answer", max_chars=MAX_TEXT_CHARS)
wrong = setup.text_input("Wrong token (one token)", key="dla_wrong", max_chars=MAX_TEXT_CHARS)
try:
    shares = cached.direct_attribution(given.source, given.text, answer, wrong)
except ValueError as error:
    picture.error(plain(str(error)))
    st.stop()
charts.show(shares_map(shares.heads, "Each head's direct share"), key="dla_heads",
            container=picture)
first, second, third = picture.columns(3)
first.metric("Logit difference", f"{shares.logit_difference:.4f}",
             help="The model's own logit(answer) − logit(wrong token) at the last position.")
second.metric("Sum of the shares", f"{shares.total:.4f}")
third.metric("Final-norm scale", f"{shares.scale:.3g}",
             help="The final norm's scale, frozen at its value in this run.")
picture.caption(plain(
    f"{shares.difference.answer_text!r} against {shares.difference.wrong_text!r} after "
    f"{len(shares.tokens)} tokens · {model.label} (the sidebar's sentence and model). Embeddings "
    "and biases (attention output projections, final norm, unembedding) add "
    f"{shares.embeddings:.3f} and {shares.biases:.3f}."))
count_column, bars = st.columns([1, 2], gap="medium")
st.session_state.setdefault("dla_count", 12)
count = count_column.slider("Parts in the bar chart", 5, 30, key="dla_count")
count_column.caption("The parts with the largest shares, largest first: blue pushes the answer "
                     "above the wrong token, red pushes it below.")
charts.show(contribution_bars(shares.largest(count), "The largest shares"), key="dla_bars",
            container=bars)
