"""Attention Explorer's Python API: the app's engine for notebooks and scripts.

Everything here is the same code the app's pages, the command line and the corpus job call; this
module only gathers the names a notebook needs so that nobody reaches into models/ (README,
"Python API", shows them in use). Each name keeps its own docstring.

    import attention_explorer as ae
    decoder = ae.load("decoder")
    attention = ae.read(decoder, "The cat sat on the mat.")
    attention.head(3, 4)                      # (T, T) numpy array

Loading: `load`, `ModelSource`, `LoadedSource`.
Reading attention, any length: `read` (-> `Attention`: `.head`, `.layer_maps`, `.rows`,
`.window`, `.summary`, `.predictions`, `.residual`, `.layer_points`), `compare`.
Hook points: `points` (names), `point_names`, `run_text` (cache and edit in one call), `Run` and
`run_model` (the mechanism itself), ready-made edits `zero_heads`, `scale_heads`,
`replace_point`, `block_edges`, `merge_edits`.
Analyses written once: `summarise_record`, `head_statistics`, `record_rollout`.
Corpus mode: `run_corpus` (every head over a corpus file, in-process or on Ray, written to a
folder), `JobSettings`, `CorpusResult` (reads such a folder).
Interventions: `experiment`, `patching_grid`, `attribution_patching`, `logit_lens`,
`logit_attribution`.
Figures and files: `heatmap`, `pooled_heatmap`, `pool`, `all_heads_figure`, `record_npz`,
`record_npz_bound`; a figure as a file: `figures_html` (one offline page, plotly.js inlined
once), `figure_image` (SVG, PDF, PNG drawn by Kaleido with the system's Chromium),
`bertviz_svg` (bertviz's view drawn in headless Chromium), `title_for`.
Configuration: `settings` (`settings.effective()`: every value in force and its source).
"""

from models.threads import collect_less_often

collect_less_often()  # before the engine's imports (models/threads.py)

from models.analysis.pooling import pool  # noqa: E402
from models.analysis.rollout import record_rollout
from models.analysis.statistics import head_statistics
from models.analysis.summary import summarise_record
from models.corpus.job import JobSettings, run_corpus
from models.corpus.result import CorpusResult
from models.experiments.attribution import attribution_patching
from models.experiments.contrast import experiment
from models.experiments.logit_attribution import logit_attribution
from models.experiments.logit_lens import logit_lens
from models.experiments.patching import patching_grid
from models.hooks import points
from models.hooks.access import Attention, compare, read
from models.hooks.edits import block_edges, replace_point, scale_heads, zero_heads
from models.hooks.edits import merge as merge_edits
from models.hooks.install import point_names
from models.hooks.run import Run, run_model
from models.hooks.text_run import TextRun, run_text
from models.loading.source import LoadedSource, ModelSource, load
from models import settings
from viz.export import record_npz, record_npz_bound
from viz.export_figures import bertviz_svg, figure_image, figures_html, title_for
from viz.heatmap import matrix_heatmap as heatmap
from viz.long_view import pooled_head_figure as pooled_heatmap
from viz.overview import all_heads_figure

__all__ = [
    "Attention", "CorpusResult", "bertviz_svg", "figure_image", "figures_html", "settings",
    "title_for", "JobSettings", "LoadedSource", "ModelSource", "Run", "TextRun", "all_heads_figure",
    "attribution_patching", "block_edges", "compare", "experiment", "head_statistics",
    "heatmap", "load", "logit_attribution", "logit_lens", "merge_edits", "patching_grid",
    "point_names", "points", "pool", "pooled_heatmap", "read", "record_npz",
    "record_npz_bound", "record_rollout", "replace_point", "run_corpus", "run_model",
    "run_text",
    "scale_heads", "summarise_record", "zero_heads",
]
