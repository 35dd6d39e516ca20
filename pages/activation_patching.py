import streamlit as st

from models.limits import MAX_TEXT_CHARS

from models.errors import ModelLoadError
from models.experiments.targets import NoPrediction
from models.experiments.attribution import agreement
from models.experiments.contrast import PromptLengths
from models.experiments.patching import (ATTN_OUT, HEAD, HEAD_PATTERN, HEAD_POSITION,
                                         HEAD_VALUES, MLP_OUT, RESID_PRE, SITES)
from ui import charts, interventions_cache as cached
from ui.examples import IOI_ANSWER, IOI_CLEAN, IOI_CORRUPTED, IOI_WRONG
from ui.routing import through_app
from ui.state import index_slider, sidebar_input, use_decoder
from ui.text import plain
from ui.token_choice import token_pills
from viz.interventions import (cell_labels, disagreement_table, estimate_scatter, patching_map,
                               tokens_side_by_side)

# Short enough for the third-width column a projector shows (a select box cannot wrap its value);
# what each one patches, with its grid's rows and columns, is in SITE_HELP.
SITE_LABELS = {
    RESID_PRE: "Residual stream",
    ATTN_OUT: "Attention outputs",
    MLP_OUT: "MLP outputs",
    HEAD: "Heads' outputs",
    HEAD_POSITION: "One layer's heads",
    HEAD_PATTERN: "Heads' patterns only",
    HEAD_VALUES: "Heads' values only",
}
SITE_HELP = {
    RESID_PRE: "the residual stream before each layer, at each position (layer × position)",
    ATTN_OUT: "each layer's attention output, at each position (layer × position)",
    MLP_OUT: "each layer's MLP output, at each position (layer × position)",
    HEAD: "each head's output at every position at once (layer × head)",
    HEAD_POSITION: "each head of the chosen layer, at each position (head × position)",
    HEAD_PATTERN: "each head's attention pattern, its values kept from the corrupted run "
                  "(layer × head)",
    HEAD_VALUES: "each head's values, its pattern kept from the corrupted run (layer × head)",
}
TITLES = {RESID_PRE: "Residual stream before each layer", ATTN_OUT: "Attention output",
          MLP_OUT: "MLP output", HEAD: "Each head's output", HEAD_POSITION: "Heads of layer {}",
          HEAD_PATTERN: "Each head's pattern only", HEAD_VALUES: "Each head's values only"}
DISAGREEMENTS = 8  # cells listed where attribution and exact patching differ most
DEFAULTS = {"patch_clean": IOI_CLEAN, "patch_corrupted": IOI_CORRUPTED,
            "patch_answer": IOI_ANSWER, "patch_wrong": IOI_WRONG}


def predictions_pills(text: str, label: str, choice_key: str, text_key: str, container) -> None:
    """The model's top tokens for `text` as pills that fill `text_key` when clicked."""
    try:
        top = cached.top_predictions(source, text)
    except ValueError:
        return  # the sentence below the prompts says what is wrong
    token_pills(label, top, choice_key, text_key, container)


through_app()

st.title("Activation patching")
# The experiment's choices beside the grid they make, so the grid is on a projector's first
# screen; the attribution estimate follows below, at full width.
setup, picture = st.columns([1, 2], gap="medium")
setup.markdown(
    "Run a **corrupted** prompt, put back one piece of the **clean** prompt's run (a layer's "
    "residual stream at one position, one head's output…), and see how much of the clean "
    "answer comes back. The measure is the logit difference logit(answer) − logit(wrong "
    "token) at the last position, scaled so that the corrupted run is **0** and the clean run "
    "**1**: a cell near 1 carries, alone, what the clean prompt adds (Wang et al. 2022)."
)
given = sidebar_input()
source = given.source
for key, value in DEFAULTS.items():
    st.session_state.setdefault(key, value)
try:
    model = cached.loaded(source)
except NoPrediction as error:
    picture.info(plain(str(error)))
    picture.button("Use the causal decoder", key="patch_use_decoder", on_click=use_decoder)
    st.stop()
except (ModelLoadError, ValueError) as error:
    picture.error(plain(str(error)))
    st.stop()
setup.caption(plain(f"Model: {model.label} (from the sidebar). This page reads its own two "
                    "prompts, not the sidebar's sentence."))

clean = setup.text_area("Clean prompt", key="patch_clean", height=100, max_chars=MAX_TEXT_CHARS)
corrupted = setup.text_area("Corrupted prompt (as many tokens)", key="patch_corrupted",
                            height=100, max_chars=MAX_TEXT_CHARS)
what = "fillers of the mask" if not model.causal else "next tokens"
predictions_pills(clean, f"Top {what} of the clean prompt (click: answer)", "patch_pick_answer",
                  "patch_answer", setup)
predictions_pills(corrupted, f"Top {what} of the corrupted prompt (click: wrong token)",
                  "patch_pick_wrong", "patch_wrong", setup)
answer = setup.text_input("Answer (one token)", key="patch_answer", max_chars=MAX_TEXT_CHARS)
wrong = setup.text_input("Wrong token (one token)", key="patch_wrong", max_chars=MAX_TEXT_CHARS)
try:
    cached.check(source, clean, corrupted, answer, wrong)
except PromptLengths as error:
    picture.error(plain(str(error)))
    picture.dataframe(tokens_side_by_side(error.clean, error.corrupted), hide_index=True,
                      key="patch_tokens")
    st.stop()
except ValueError as error:
    picture.error(plain(str(error)))
    st.stop()

site = setup.selectbox("What to patch", SITES, format_func=SITE_LABELS.get, key="patch_site",
                       help="\n".join(f"- **{SITE_LABELS[name]}**: {SITE_HELP[name]}"
                                      for name in SITES))
setup.caption(f"Patched: {SITE_HELP[site]}.")
layer = None
if site == HEAD_POSITION:
    layer = index_slider("Layer", cached.layer_count(source), "patch_layer", container=setup)
bar = picture.progress(0.0, text="Patching…")
try:
    grid = cached.patching_grid(source, clean, corrupted, answer, wrong, site, layer,
                                _progress=lambda done, total: bar.progress(
                                    done / total, text=f"Patched {done} of {total} cells…"))
except ValueError as error:
    bar.empty()
    picture.error(plain(str(error)))
    st.stop()
bar.empty()
rows = [str(index) for index in range(grid.values.shape[0])]
columns = list(grid.tokens) if grid.by_position else [str(h) for h in range(grid.values.shape[1])]
axes = (grid.row_name, grid.column_name)
title = TITLES[site].format(layer)
charts.show(patching_map(grid.values, grid.raw, rows, columns, title, axes), key="patch_grid",
            container=picture)
first, second, third = picture.columns(3)
DIFFERENCE = "logit(answer) − logit(wrong token) at the last position"
first.metric("Clean run", f"{grid.clean_metric:.3f}", help=f"The clean prompt's {DIFFERENCE}.")
second.metric("Corrupted run", f"{grid.corrupted_metric:.3f}",
              help=f"The corrupted prompt's {DIFFERENCE}.")
third.metric("Cells", f"{grid.values.size}", help=f"{grid.forwards} batched forward passes")
picture.caption(plain(f"{grid.difference.answer_text!r} against {grid.difference.wrong_text!r}. "
                      "Blue cells bring the clean answer back; red cells push it further away. "
                      "Hover for each cell's exact value and its logit difference."))
picture.download_button("Download the grid as CSV", grid.csv_text(), key="patch_csv",
                        file_name=f"patching_{site}.csv", mime="text/csv", on_click="ignore")

st.subheader("Attribution patching beside it")
st.markdown(
    "The gradient's estimate of the same grid: (clean − corrupted activation) · ∂metric/∂"
    "activation, at the corrupted run, for every cell from **one forward and one backward** "
    "pass (Nanda 2023). It is exact where the metric is linear in the activation; where the "
    "two disagree, trust the exact grid."
)
if site in (HEAD_PATTERN, HEAD_VALUES):
    st.info("Attribution patching estimates whole heads and positions; choose another site "
            "to compare it with exact patching.")
else:
    grids = cached.attribution_grids(source, clean, corrupted, answer, wrong)
    estimate = grids.site(site, layer)
    matched = agreement(grid.values, estimate, DISAGREEMENTS)
    picture, scatter = st.columns(2)
    charts.show(patching_map(estimate, grids.raw(site, layer), rows, columns,
                             "Attribution estimate", axes), key="patch_estimate",
                container=picture)
    charts.show(estimate_scatter(grid.values, estimate, cell_labels(rows, columns, axes),
                                 f"Correlation {matched.correlation:.2f}"),
                key="patch_scatter", container=scatter)
    st.markdown(f"**Where they disagree most** (correlation over all cells: "
                f"{matched.correlation:.3f})")
    st.dataframe(disagreement_table(matched.disagreements, rows, columns, axes),
                 hide_index=True, key="patch_disagreements")
