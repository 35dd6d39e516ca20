import streamlit as st

from models.analysis.detectors import DETECTORS, DETECTORS_BY_NAME, NotMeasurable
from models.analysis.repeated_tokens import DEFAULT_REPEAT_LENGTH, DEFAULT_SEED
from ui import analysis_cache, charts
from ui import attention as inputs
from ui.analysis_cache import open_head_buttons
from ui.routing import through_app
from ui.state import sidebar_input
from ui.text import plain
from viz.head_analysis import layer_head_map, ranked_heads
from viz.labels import display_tokens

TOP_HEADS = 5
OPEN_BUTTONS = 3

through_app()

st.title("Head detectors")
# The detector's choices beside its map, so the map is on a projector's first screen.
setup, picture = st.columns([1, 2], gap="medium")
setup.markdown(
    "Some heads do one simple job on almost any input: look at the previous token, look back "
    "at an earlier copy of the same token, continue a pattern seen before (induction heads, "
    "Olsson et al. 2022), or park their attention on the first token or [SEP]. A detector "
    "scores every head of the model in the sidebar from 0 (never) to 1 (always); an even spread "
    "over n tokens scores about 1/n."
)
given = sidebar_input()
attention = inputs.current(token_options=False)
if attention is not None:
    if given.merge_words or given.hide_special:
        setup.caption("Detectors read the model's own tokens, so the sidebar's token options do "
                      "not apply here.")
    name = setup.radio("Detector", [d.name for d in DETECTORS], key="detectors_kind",
                       horizontal=True)
    detector = DETECTORS_BY_NAME[name]
    setup.markdown(f"**Definition.** {detector.definition}")
    try:
        if detector.on_repeated_tokens:
            st.session_state.setdefault("detectors_length", DEFAULT_REPEAT_LENGTH)
            st.session_state.setdefault("detectors_seed", DEFAULT_SEED)
            count = setup.slider("Random tokens in one copy", 5, 50, key="detectors_length")
            seed = setup.number_input("Seed", 0, 2**31 - 1, key="detectors_seed")
            measured = analysis_cache.repeated_tokens(given.source, count, int(seed))
            setup.caption(plain(f"Measured on {count} tokens drawn at random (seed {seed}) from "
                                f"the model's vocabulary and repeated twice: "
                                f"{' '.join(display_tokens(measured.tokens))}"))
            scores = detector.score(measured)
        else:
            setup.caption(f"Measured on the sidebar's text ({inputs.caption(attention)}; word "
                          "pieces and special tokens as the model reads them).")
            scores = attention.summary().detector_scores(name)
    except NotMeasurable as error:
        picture.info(plain(str(error)))
        st.stop()
    table = ranked_heads(scores)
    charts.show(layer_head_map(scores, f"{name} score of every layer and head", "score"),
                key="detectors_map", container=picture)
    setup.markdown(f"Strongest {name} heads: " + ", ".join(
        f"layer {row.layer} · head {row.head} ({row.score:.2f})"
        for row in table.head(TOP_HEADS).itertuples()))
    open_head_buttons([(int(row.layer), int(row.head), f"score {row.score:.3f}")
                       for row in table.head(OPEN_BUTTONS).itertuples()], "detectors_open",
                      container=setup)
    if detector.on_repeated_tokens:
        setup.caption("The maps page shows the sidebar's sentence, not the random tokens.")
