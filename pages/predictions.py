import streamlit as st

from ui import attention as inputs
from ui import charts, views
from ui.routing import through_app
from ui.state import first_choice, loaded_source, sidebar_input, use_decoder
from ui.text import plain
from viz.generation import visible_text
from viz.labels import display_tokens
from viz.predictions import (LOSS_FORMAT, PROBABILITY_FORMAT, candidate_bars, loss_figure,
                             position_table)

through_app()

MAX_LISTED_POSITIONS = 512  # more positions than this: a typed position, not a list


def position_choice(per_position, tokens: tuple[str, ...], many: bool) -> int:
    """The position whose candidates are drawn: a list of the tokens, or for many tokens a
    number (thousands of options are not a list to scroll)."""
    last = per_position.positions[-1].position
    if many:
        value = st.session_state.get("pred_position_number")
        if not isinstance(value, int) or not 0 <= value <= last:
            st.session_state["pred_position_number"] = last
        return int(st.number_input(f"Position (0–{last:,}): the last token the model has read",
                                   0, last, key="pred_position_number"))
    words = display_tokens(tokens)
    labels = {p.position: f"after #{p.position} {visible_text(words[p.position])}"
              for p in per_position.positions}
    first_choice("pred_position", labels, list(labels)[-1])  # the last position first
    return st.selectbox("Position", list(labels), format_func=labels.get, key="pred_position")


def show_positions(per_position, tokens: tuple[str, ...], many: bool = False) -> None:
    """The loss at every position, one position's candidates, and the table of all of them."""
    st.subheader("Prediction against what came, at every position")
    charts.show(loss_figure(per_position), key="pred_loss")
    position = position_choice(per_position, tokens, many)
    chosen = per_position.positions[position]
    rank = (f"its choice number {chosen.rank}" if chosen.rank is not None
            else f"not among its top {len(chosen.candidates)}")
    st.markdown(
        f"After reading up to token #{position}, the model gave the token that came, "
        f"`{plain(visible_text(chosen.actual.text))}`, probability "
        f"{PROBABILITY_FORMAT % chosen.actual.probability} ({rank}; loss "
        f"{LOSS_FORMAT % chosen.loss_bits} bits).")
    charts.show(candidate_bars(chosen.candidates, f"Candidates after token #{position}",
                               chosen.actual.token_id), key="pred_candidates")
    st.dataframe(position_table(per_position, tokens), hide_index=True, key="pred_table",
                 column_config={  # as the sentence above writes them
                     "probability": st.column_config.NumberColumn(format=PROBABILITY_FORMAT),
                     "loss (bits)": st.column_config.NumberColumn(format=LOSS_FORMAT)})


st.title("What the model predicts")
given = sidebar_input()
intro, picture = st.columns([1, 2], gap="medium")  # the explanation beside the main figure
intro.markdown(
    "Attention is how a model gathers information; its **prediction** is what it does with it. "
    "A causal decoder predicts the next token from everything before it; a masked language "
    "model (BERT and its relatives) fills in a hidden word: type the model's mask token, such "
    "as `[MASK]`, where a word should go."
)
intro.expander("What the page shows").markdown(
    "For a causal decoder: its top 10 candidates after your text, and, at every position (below "
    "the bars), what it expected against the token that actually came (the loss, in bits: 0 "
    "means it was certain and right). For a masked language model: the top 10 fillers of each "
    "mask token."
)
attention = inputs.current(token_options=False)
if attention is not None:
    predictions = views.with_progress(
        "Predicting every next token", lambda progress: attention.predictions(progress))
    tokens = attention.tokens
    many = len(tokens) > MAX_LISTED_POSITIONS
    if predictions is None:
        picture.info(f"{plain(attention.label)} has no language-model head, so it makes no "
                     "prediction to show here (this app never invents one); the causal decoder "
                     "predicts the next token.")
        picture.button("Use the decoder's next-token view", key="pred_use_decoder",
                       on_click=use_decoder)
    elif predictions.next_token is not None:
        intro.caption(plain(inputs.caption(attention)))
        charts.show(candidate_bars(predictions.next_token.candidates,
                                   "The model's top 10 next tokens after your text"),
                    key="pred_next", container=picture)
        if predictions.positions is None:
            st.info("The text is a single token, so there is no position where a prediction "
                    "can be compared with the token that came.")
        else:
            show_positions(predictions.positions, tokens, many)
    elif predictions.masks:
        intro.caption(plain(inputs.caption(attention)))
        for index, fillers in enumerate(predictions.masks):
            charts.show(candidate_bars(
                fillers.candidates, f"Top 10 fillers for the mask at token #{fillers.position}"),
                key=f"pred_mask_{index}", container=picture)
    else:
        mask = plain(loaded_source(given.source).mask_token or "[MASK]")
        picture.info(f"The text has no {mask}: type {mask} where a word should go, and the "
                     "model fills it in.")
