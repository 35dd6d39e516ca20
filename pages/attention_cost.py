import streamlit as st

from models.limits import COST_REPEATS
from models.teaching.attention_cost import COST_LENGTHS, SHAPES, crossover_tokens, flop_count
from ui import charts
from ui import cost_cache
from ui.routing import through_app
from viz.attention_cost import flops_figure, measured_figure

through_app()

ARITHMETIC_LENGTHS = (16, 64, 256, 1024, 4096, 16384)
MEASURE_REQUESTED = "cost_measure_requested"

st.title("The n² cost of attention")
# The choice of layer beside its arithmetic, so the curves are on a projector's first screen.
setup, picture = st.columns([1, 2], gap="medium")
setup.markdown(
    "With n tokens, every query is compared with every key: n² dot products per head and "
    "layer, and n² weights to keep. The projections that make q, k and v and the feed-forward "
    "block (MLP) treat each token on its own, so their cost grows only like n. For short inputs "
    "the linear parts dominate; double the length and attention's part grows four times, so "
    "past some length it takes over."
)
names = {shape.name: shape for shape in SHAPES}
shape = names[setup.radio("Layer", list(names), horizontal=True, key="cost_shape")]
crossover = crossover_tokens(shape)
counts = [flop_count(tokens, shape) for tokens in ARITHMETIC_LENGTHS]
charts.show(flops_figure(counts, crossover, shape.name), key="cost_flops", container=picture)
example = flop_count(512, shape)
st.markdown(
    f"**The arithmetic** (width D = {shape.width}, H = {shape.heads} heads of "
    f"{shape.head_width}, MLP width F = {shape.feed_forward}; a multiply-add is 2 FLOPs): "
    f"q·kᵀ is H · T² · 2·D/H = 2·T²·D FLOPs, the weighted sum of the values the same, the "
    f"softmax about 3·H·T²; the projections are 4 · 2·T·D² and the MLP 2 · 2·T·D·F. At 512 "
    f"tokens that is {example.quadratic / 1e9:.2f} GFLOP in the T² part against "
    f"{example.linear / 1e9:.2f} GFLOP in the linear parts; they are equal at about "
    f"{crossover:,} tokens (T = (8D² + 4DF) / (4D + 3H)). The scores and weights take "
    f"2 · H · T² · 4 bytes: {2 * shape.heads * 512 ** 2 * 4 / 2 ** 20:.0f} MiB at 512 tokens, "
    "four times as much at 1,024."
)
st.subheader("Measured on this machine")
st.markdown(
    f"One layer with random weights, timed at {', '.join(map(str, COST_LENGTHS))} tokens (the "
    f"fastest of {COST_REPEATS} runs of each part; other work on the machine makes the times "
    "noisy, the slopes are what counts). On a log–log plot, a part that grows like n has slope "
    "1 and one that grows like n² slope 2."
)
measurement = cost_cache.kept_measurement(shape)
st.button("Measure now" if measurement is None else "Measure again", key="cost_measure",
          type="primary", on_click=lambda: st.session_state.update({MEASURE_REQUESTED: True}))
if st.session_state.pop(MEASURE_REQUESTED, False):  # a flag: the click survives the app's reruns
    measurement = cost_cache.measure(shape)
if measurement is not None:
    charts.show(measured_figure(measurement), key="cost_measured")
    first, last = measurement.timings[0], measurement.timings[-1]
    growth = last.tokens / first.tokens
    st.caption(f"From {first.tokens} to {last.tokens} tokens ({growth:.0f}× longer) the T² "
               f"part took {last.attention_s / first.attention_s:.0f}× as long and "
               f"{last.attention_bytes / first.attention_bytes:.0f}× the memory; the MLP "
               f"{last.feed_forward_s / first.feed_forward_s:.0f}× as long.")
