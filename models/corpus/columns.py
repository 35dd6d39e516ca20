"""The columns of a corpus job's tables, and how a batch's results become rows.

`passages.parquet` has one row per passage, layer and head: `passage`, `tokens`, `layer`, `head`,
`even_spread_bits` (the passage's entropy of an even spread, for the 'broad' label), then one
column per measure (STATISTICS, from models.analysis.statistics, and DETECTORS, from
models.analysis.detectors: NaN where a detector cannot measure the passage). `heads.parquet`
has one row per layer and head with `<measure>_mean` and `<measure>_std` over the passages (and
`<measure>_passages`, how many passages had a value), and the head's label read from its means.

Dimensions: B batch, L layers, H heads.
"""

from __future__ import annotations

import numpy as np

from models.analysis.statistics import COLUMN_HELP

# measure column -> the statistics column it reads (entropy in bits, as the issue names it)
STATISTICS = {"entropy": "entropy_bits", "mean_distance": "mean_distance", "cls": "cls",
              "sep": "sep", "first": "first", "punctuation": "punctuation", "self": "self",
              "previous": "previous", "next": "next"}
# measure column -> the sentence detector it reads
DETECTORS = {"previous_token": "previous-token", "duplicate_token": "duplicate-token",
             "first_token_sink": "first-token sink", "sep_sink": "[SEP] sink"}
MEASURES = (*STATISTICS, *DETECTORS)
KEYS = ("passage", "tokens", "layer", "head", "even_spread_bits")
MEAN, STD, COUNT = "_mean", "_std", "_passages"
MEASURE_HELP = {
    **{name: COLUMN_HELP[source] for name, source in STATISTICS.items()},
    "previous_token": "Previous-token detector: weight on the token just before each query.",
    "duplicate_token": "Duplicate-token detector: weight on earlier copies of the query's token "
                       "(passages without a repeated token have none).",
    "first_token_sink": "First-token sink detector: weight each later query puts on the first "
                        "token.",
    "sep_sink": "[SEP] sink detector: weight on the special tokens after the first (models "
                "without such tokens have none).",
}


def passage_rows(result) -> dict[str, np.ndarray]:
    """A models.corpus.batch_pass.BatchResult as columns of passages.parquet, passage by
    passage, then layer by layer, then head by head."""
    measured = {name: result.statistics.columns[source] for name, source in STATISTICS.items()}
    measured.update({name: result.detectors.scores[source] for name, source in
                     DETECTORS.items()})
    batch, layers, heads = measured["entropy"].shape  # (B, L, H)
    per_passage = layers * heads
    layer_index, head_index = np.meshgrid(np.arange(layers), np.arange(heads), indexing="ij")
    rows = {
        "passage": np.repeat(result.passages, per_passage),
        "tokens": np.repeat(result.tokens, per_passage),
        "layer": np.tile(layer_index.ravel(), batch).astype(np.int32),
        "head": np.tile(head_index.ravel(), batch).astype(np.int32),
        "even_spread_bits": np.repeat(result.statistics.broad_bits, per_passage),
    }
    rows.update({name: values.reshape(-1).astype(np.float64) for name, values in
                 measured.items()})
    return rows
