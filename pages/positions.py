import streamlit as st

from models.errors import ModelLoadError
from ui import charts
from ui import teaching_cache as teach
from ui.state import decoder_with_progress, sidebar_input
from ui.text import plain
from viz.positions import similarity_heatmap, sinusoid_heatmap
from viz.rotary import rotary_heatmap, turn_per_token_figure
from ui.routing import through_app

through_app()

st.title("Positions")
# The choices beside the sinusoids, so the encoding is on a projector's first screen.
setup, picture = st.columns([1, 2], gap="medium")
setup.markdown(
    "Attention by itself ignores word order: shuffle the tokens and every token gets the same "
    "weights as before, just shuffled along. *Dog bites man* and *man bites dog* would look "
    "alike. So before the first layer a **position vector** is added to each token's embedding. "
    "The original Transformer used fixed sine and cosine waves; BERT-style models, like the "
    "pretrained model in the sidebar, learn a table of position vectors during training."
)
st.session_state.setdefault("positions_count", 64)
st.session_state.setdefault("positions_dim", 128)
count = setup.slider("Positions", 8, 512, step=8, key="positions_count")
dim = setup.slider("Dimensions (sinusoidal encoding)", 16, 768, step=16, key="positions_dim")
setup.subheader("The sinusoidal encoding")
setup.markdown(
    "Each row is the vector added at one position. Columns come in pairs: column 2i holds "
    "sin(p / 10000^(2i/d)) and column 2i + 1 the cosine of the same angle. At position 0 every "
    "sine is 0 and every cosine is 1. The pairs on the left turn fast and repeat within a few "
    "positions; further right they turn so slowly that they tell far-apart positions apart, a "
    "little like the hands of a clock."
)
charts.show(sinusoid_heatmap(teach.sinusoid(count, dim)), key="positions_sinusoid",
            container=picture)

st.subheader("How alike are two positions?")
st.markdown(
    "Each cell is the cosine similarity between the vectors of two positions (1: same "
    "direction, 0: unrelated). For the sinusoids it depends only on the distance between the "
    "two positions, so every diagonal is constant: shifting a pair of positions does not change "
    "how alike they look. The learned table had no such rule built in; see how much of it the "
    "model picked up from text."
)
name = sidebar_input().encoder_name
sinusoid_column, learned_column = st.columns(2)
charts.show(
    similarity_heatmap(teach.sinusoid_similarity(count, dim), f"Sinusoidal, d = {dim}"),
    key="positions_sinusoid_similarity", container=sinusoid_column)
try:
    available = teach.learned_count(name)
    if available == 0:
        learned_column.info(f"'{name}' has no learned position table (it encodes positions "
                            "another way), so there is nothing to compare here.")
    else:
        shown = min(count, available)
        if shown < count:
            learned_column.caption(f"'{name}' learned only {available} positions.")
        charts.show(
            similarity_heatmap(teach.learned_similarity(name, shown), f"Learned by {name}"),
            key="positions_learned_similarity", container=learned_column)
except ModelLoadError as error:
    learned_column.error(plain(str(error)))

given = sidebar_input()
if given.source.causal:
    st.subheader("Rotary positions: how the decoder knows where a token is")
    st.markdown(
        "The causal decoder in the sidebar adds **no** position vector at all. Instead, just before "
        "q·k, it turns every pair of dimensions of q and of k by an angle that grows with the "
        "position: p·θᵢ, with a different speed θᵢ for each pair. Turning both vectors by their "
        "own position's angle makes q·k depend only on the **difference** of the two positions, "
        "which is what attention needs. Fast pairs (left) tell neighbours apart, slow pairs "
        "(right) barely move over a whole text and tell far-apart positions apart. The angles "
        "below are read from the model's own rotary tables."
    )
    try:
        decoder_with_progress(given.decoder_name)
        angles = teach.rotary(given.decoder_name, count)
    except ModelLoadError as error:
        st.error(plain(str(error)))
    else:
        if angles is None:
            st.info(f"{plain(given.decoder_name)} encodes positions without rotation (a learned "
                    "table or none), so there are no rotary angles to show.")
        else:
            charts.show(rotary_heatmap(angles), key="positions_rotary")
            charts.show(turn_per_token_figure(angles), key="positions_rotary_speed")
