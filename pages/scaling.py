import textwrap

import streamlit as st

from models.teaching.scaling import DIMENSION_CHOICES
from ui import teaching_cache as teach
from ui.charts import presentation, show
from ui.routing import through_app
from viz.scaling import (APPROXIMATION_NOTE, LINEAR_SCALE, LOG_LOG_SCALE, SQRT_SCALE, X_SCALES,
                         dot_product_figure, entropy_curve_figure, legend_above_plot,
                         softmax_bars_figure)
from viz.style import PRESENTER_NOTE_CHARS

through_app()

EXPERIMENT_SEED = 0
SCALE_LABELS = {SQRT_SCALE: "spaced by √d (√d is a straight line)",
                LOG_LOG_SCALE: "both axes log (√d has slope ½)",
                LINEAR_SCALE: "linear"}

NOTE_CHARACTERS = 64  # a line of the dot-product figure's note, to fit a two-thirds column
AXIS_TITLE_PX = 80  # under the plot: tick labels and the x axis title, above the note
LINE_HEIGHT = 1.35  # of the note's font size
PRESENTER_NOTE_PX = 18


def for_a_column(figure):
    """The dot-product figure in a column: its legend between the title and the plot, and its
    note wrapped into short lines, with room for them under the axis."""
    presenter = presentation().presenter
    legend_above_plot(figure, max(figure.layout.font.size, PRESENTER_NOTE_PX if presenter else 0))
    note = figure.layout.annotations[-1]
    # in presenter mode at the width the presenter theme wraps notes to: wrapped twice, at two
    # widths, its lines were ragged ("grows like √d is a" / "straight line through 0.")
    width = min(NOTE_CHARACTERS, PRESENTER_NOTE_CHARS) if presenter else NOTE_CHARACTERS
    lines = [part for line in note.text.split("<br>") for part in textwrap.wrap(line, width)]
    size = max(note.font.size or 0, PRESENTER_NOTE_PX if presenter else 0)
    room = AXIS_TITLE_PX + round(len(lines) * size * LINE_HEIGHT)
    note.update(text="<br>".join(lines), yshift=-room + 10)
    figure.update_layout(margin=dict(b=room), height=figure.layout.height + room
                         - figure.layout.margin.b)
    return figure


st.title("Why attention is scaled")
controls, picture = st.columns([1, 2], gap="medium")  # the controls beside what they drive
controls.markdown(
    "An attention score is a dot product q·k, a sum of d_k products: its typical size grows like "
    "√d_k. Transformers therefore divide the scores by √d_k before the softmax."
)
controls.expander("Why √d_k").markdown(
    "An attention score is a dot product q·k: a sum of d_k products, one per dimension. If the "
    "numbers in q and k are random with variance 1, every product adds variance 1, so the sum "
    "has variance d_k and a typical size of about √d_k. Bigger heads would get bigger scores "
    "for no reason but their size. Transformers therefore divide the scores by √d_k before the "
    "softmax. This page shows the growth in a measurement, and what the softmax does when "
    "the scores are left unscaled."
)
st.session_state.setdefault("scaling_dk", 64)
dimension = controls.select_slider("d_k, the size of each query and key vector", DIMENSION_CHOICES,
                                   key="scaling_dk", format_func="{:,}".format,
                                   help="Powers of two, as in real heads, and powers of ten, as in "
                                        "the chapter's experiment (d = 10 and d = 10,000).")

controls.subheader("Dot products grow like √d")
experiment = teach.dot_products(EXPERIMENT_SEED)
yours = teach.dot_products_at(dimension, EXPERIMENT_SEED)
x_scale = controls.radio("x axis", X_SCALES, format_func=SCALE_LABELS.get,
                         key="scaling_axis",
                         help="A log x axis with a linear y axis makes √d look like it explodes; "
                              "spaced by √d, growth like √d is a straight line.")
show(for_a_column(dot_product_figure(
    experiment.dimensions, experiment.mean_abs, experiment.approximation,
    samples=experiment.samples, highlight=(dimension, float(yours.mean_abs[0])), x_scale=x_scale)),
     key="scaling_dots", container=picture)
picture.caption(
    APPROXIMATION_NOTE + " "
    f"For each d from 1 to {int(experiment.dimensions[-1]):,}, {experiment.samples:,} pairs of "
    f"vectors were drawn from a standard normal distribution (seed {EXPERIMENT_SEED}). At your "
    f"d_k = {dimension:,} the mean |q·k| is {yours.mean_abs[0]:.2f}; √(2d/π) predicts "
    f"{yours.approximation[0]:.2f} (ratio {yours.ratio[0]:.3f}). Dividing by √d_k = "
    f"{dimension ** 0.5:.1f} brings it back to about √(2/π) ≈ 0.8, whatever the size of d_k."
)

st.subheader("What the softmax does with large scores")
controls, picture = st.columns([1, 2], gap="medium")
controls.markdown(
    "Here is one query scored against a few random keys. The softmax turns score differences "
    "into ratios e^(difference): a difference of 30 makes one weight about 10¹³ times another. "
    "Unscaled, the scores spread over about ±√d_k, so for large d_k nearly all the weight lands "
    "on one key (the softmax **saturates**) and its gradient all but vanishes. The entropy "
    "measures how spread out the weights are: log₂ N bits when uniform over N keys, 0 when all "
    "on one."
)
st.session_state.setdefault("scaling_keys", 8)
st.session_state.setdefault("scaling_seed", 0)
num_keys = controls.slider("Number of keys", 2, 32, key="scaling_keys")
seed = controls.number_input("Random draw (seed)", 0, 10_000, key="scaling_seed")
row = teach.row(dimension, num_keys, int(seed))
controls.metric("Entropy, unscaled", f"{row.unscaled_entropy:.2f} bits")
controls.metric(f"Entropy, scaled by 1/√{dimension}", f"{row.scaled_entropy:.2f} bits")
controls.metric("Uniform (maximum)", f"{row.max_entropy:.2f} bits")
show(softmax_bars_figure(dimension, unscaled_scores=row.unscaled_scores,
                         unscaled_weights=row.unscaled_weights, scaled_scores=row.scaled_scores,
                         scaled_weights=row.scaled_weights,
                         entropies=(row.unscaled_entropy, row.scaled_entropy)),
     key="scaling_bars", container=picture)

st.markdown(
    "One row can be lucky or unlucky, so the curve below averages the entropy over "
    f"{teach.ENTROPY_ROWS} random rows of {num_keys} keys for each d. Unscaled, it falls towards "
    "0 as d grows; scaled, it stays where it was at d = 1."
)
curve = teach.entropies(num_keys, EXPERIMENT_SEED)
show(entropy_curve_figure(curve.dimensions, curve.unscaled, curve.scaled, num_keys=num_keys,
                          highlight=dimension), key="scaling_entropy")
