"""The per-head statistics' names (defined in models.analysis.statistics). Plain names with no
import: the command line offers them without loading torch."""

SHARE_COLUMNS = ("cls", "sep", "first", "punctuation", "self", "previous", "next")
NUMERIC_COLUMNS = ("entropy_bits", "mean_distance") + SHARE_COLUMNS
# shares of the norm-based attention ‖α·f(x)‖ (models.analysis.norm_shares): in a table only when
# its tokens are the model's own
NORM_COLUMNS = ("norm_cls", "norm_sep")
SQUARE_ONLY = ("mean_distance", "cls", "sep", "self", "previous", "next")
