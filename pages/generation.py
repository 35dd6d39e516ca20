import streamlit as st

from models.experiments.generation import (
    DEFAULT_NEW_TOKENS, DEFAULT_TOP_K, MAX_NEW_TOKENS, GenerationRefused, GenerationSettings,
)
from ui import charts
from ui.generation_cache import generation
from ui.routing import through_app
from ui.state import index_slider, sidebar_input
from ui.text import plain
from viz.generation import (
    candidates_figure, heads_by_steps_figure, sink_share_figure, step_row_figure,
)

FIRST_TOKEN = "weight on the first token"
ENTROPY = "entropy of the row (bits)"
NEWLINE, NEWLINE_SHOWN = "\n", "↵"

through_app()

st.title("Generation, one token at a time")
controls, picture = st.columns([1, 2], gap="medium")  # the controls beside what they drive
controls.markdown(
    "A causal decoder writes text one token at a time: at each step it gives every token of its "
    "vocabulary a probability, one is chosen, appended, and the next step begins."
)
controls.expander("How one step works").markdown(
    "At each step the model reads everything so far, gives every token of its vocabulary a "
    "probability, and one is chosen: the most probable (**greedy**), or drawn at random after "
    "dividing the scores by a **temperature** and keeping the **top k**. The new token is "
    "appended and the next step begins. The model keeps the keys and values of earlier tokens "
    "(the *key/value cache*), so each step computes attention for the newest token only: one "
    "attention row per layer and head, over every token before it."
)
given = sidebar_input()
controls.caption(f"Prompt: the sidebar's sentence. Model: the decoder {given.decoder_name}, "
                 "whatever model the sidebar shows."
                 + (" The second sentence is not used here." if given.pair else ""))

for key, default in (("gen_new_tokens", DEFAULT_NEW_TOKENS), ("gen_temperature", 1.0),
                     ("gen_top_k", DEFAULT_TOP_K), ("gen_seed", 0)):
    st.session_state.setdefault(key, default)
new_tokens = controls.number_input(
    "New tokens", min_value=0, step=1, key="gen_new_tokens",
    help=f"At most {MAX_NEW_TOKENS}, and the prompt and new tokens together must fit the model.")
mode = controls.radio("Choose each token", ["Greedy", "Sample"], horizontal=True,
                      key="gen_mode")
settings = None
try:
    if mode == "Greedy":
        settings = GenerationSettings(new_tokens=int(new_tokens))
    else:
        settings = GenerationSettings(
            new_tokens=int(new_tokens), greedy=False,
            temperature=controls.number_input(
                "Temperature", min_value=0.0, step=0.1, key="gen_temperature",
                help="Below 1 sharpens the distribution, above 1 flattens it."),
            top_k=int(controls.number_input("Top k", min_value=1, step=1, key="gen_top_k")),
            seed=int(controls.number_input("Seed", min_value=0, max_value=2**31 - 1, step=1,
                                           key="gen_seed",
                                           help="The same seed draws the same tokens.")),
        )
except GenerationRefused as error:
    controls.warning(plain(str(error)))

with picture:  # anything the generation itself reports goes beside the controls
    result = (generation(given.decoder_name, given.text, settings) if settings is not None
              else None)
if result is not None:
    picture.text(f"Prompt:    {given.text.strip()}\n"
                 f"Generated: {result.generated_text.replace(NEWLINE, NEWLINE_SHOWN)}")
    if result.stopped_at_end:
        controls.info(f"The model chose its end-of-text token at step {result.num_steps - 1}, "
                      "so generation stopped there.")

    controls.subheader("Step by step")
    step_index = index_slider("Step", result.num_steps, "gen_step", controls)
    layer = index_slider("Layer", result.num_layers, "gen_layer", controls)
    head = index_slider("Head", result.num_heads, "gen_head", controls)
    step = result.steps[step_index]
    read = result.read_tokens(step_index)
    controls.markdown(
        f"At step {step_index} the model read {step.num_read} tokens and chose "
        f"`` {step.token.text!r} `` with probability {step.token.probability:.3f} "
        f"({settings.description})."
    )
    charts.show(candidates_figure(
        [c.text for c in step.candidates], [c.probability for c in step.candidates],
        next((i for i, c in enumerate(step.candidates) if c.token_id == step.token.token_id),
             None),
        f"Step {step_index}: the candidates"), key="gen_candidates", container=picture)
    charts.show(step_row_figure(
        step.weights[layer, head], read,
        f"Layer {layer} · head {head}: the row that chose the token"), key="gen_row",
        container=picture)
    picture.caption("The row belongs to the last token read: its output, after the last layer, "
                    "is what gave the candidates their probabilities. Its weights add up to 1.")

    st.subheader("Every head of a layer, over the steps")
    measure = st.radio("Colour by", [FIRST_TOKEN, ENTROPY], horizontal=True, key="gen_measure")
    if measure == FIRST_TOKEN:
        values, top = result.first_token_weights()[:, layer], 1.0
    else:
        values, top = result.row_entropy_bits()[:, layer], result.max_entropy_bits()
    charts.show(heads_by_steps_figure(
        values.T, [s.token.token for s in result.steps], f"Layer {layer}: {measure}, step by step",
        measure, top), key="gen_overview")

    st.subheader("Attention sinks: the first token")
    st.markdown(
        "Many heads of a decoder put a large share of every row on the very first token, whatever "
        "it is. Softmax makes each row add up to 1, so a head with nothing useful to read must "
        "still put its weight somewhere, and the first token, which every later token can see, "
        "becomes that resting place: an *attention sink* (Xiao et al., 2023). The map shows, for "
        "every layer and head, the mean weight on the first token over the generated steps."
    )
    sink_layer, sink_head, sink_value = result.strongest_sink()
    charts.show(sink_share_figure(result.sink_share(), "Mean weight on the first token"),
                key="gen_sinks")
    st.caption(
        f"If attention were spread evenly, the first token would get {result.even_share():.3f} "
        f"on average; layer {sink_layer}, head {sink_head} gives it {sink_value:.3f}."
    )
