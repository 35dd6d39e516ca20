import streamlit as st

from models.limits import MAX_TEXT_CHARS

from models.errors import ModelLoadError
from models.experiments.targets import NoPrediction
from ui import charts, interventions_cache as cached
from ui.routing import through_app
from ui.state import sidebar_input, use_decoder
from ui.text import plain
from viz.interventions import lens_map, lens_table, rank_figure

FINAL, CHOSEN = "final", "chosen"
COLOUR_LABELS = {FINAL: "the token the model finally predicts there",
                 CHOSEN: "the token to follow"}

through_app()

st.title("Logit lens")
# The choices beside the map, so the map is on a projector's first screen.
setup, picture = st.columns([1, 2], gap="medium")
setup.markdown(
    "Each layer's residual stream is read by the model's own final norm and unembedding, as if "
    "the model stopped there (nostalgebraist 2020). Each cell shows that layer's most probable "
    "token at that position: the answer often appears in the middle layers already, and the "
    "layers after only make it surer. The last row is the model's own prediction."
)
given = sidebar_input()
try:
    model = cached.loaded(given.source)
except NoPrediction as error:
    picture.info(plain(str(error)))
    picture.button("Use the causal decoder", key="lens_use_decoder", on_click=use_decoder)
    st.stop()
except (ModelLoadError, ValueError) as error:
    picture.error(plain(str(error)))
    st.stop()
if not given.text.strip():
    picture.info("Type a prompt in the sidebar to read it layer by layer.")
    st.stop()
token = setup.text_input("Token to follow (empty: the model's own prediction)", key="lens_token",
                         max_chars=MAX_TEXT_CHARS)
colour = setup.radio("Colour each cell by the probability of", (FINAL, CHOSEN),
                     format_func=COLOUR_LABELS.get, key="lens_colour")
try:
    lens = cached.lens(given.source, given.text, token.strip() and token)
except ValueError as error:
    picture.error(plain(str(error)))
    st.stop()
where = ("the last token, which predicts the next one" if model.causal
         else "the mask token, which predicts the hidden word")
setup.caption(plain(f"{len(lens.tokens)} tokens · {model.label} (the sidebar's sentence and "
                    f"model). The token to follow, {lens.chosen_text!r}, is read at position "
                    f"{lens.position}, {where}."))
texts = lens.text_grid()
shown = lens.final_probability if colour == FINAL else lens.chosen_probability
title = ("Each layer's top token; colour: P(the final prediction)" if colour == FINAL
         else f"Each layer's top token; colour: P({lens.chosen_text!r})")
charts.show(lens_map(shown, texts, lens.top_probabilities, lens.rows, lens.tokens, title,
                     "probability"), key="lens_map", container=picture)
charts.show(rank_figure(lens.chosen_rank[:, lens.position],
                        lens.chosen_probability[:, lens.position], lens.rows, lens.chosen_text),
            key="lens_rank")
with st.expander("Every layer's top token at every position, as a table"):
    st.dataframe(lens_table(texts, lens.top_probabilities, lens.rows, lens.tokens),
                 key="lens_table")
