"""The per-head statistics' names (defined in models.analysis.statistics). Plain names with no
import: the command line offers them without loading torch."""

SHARE_COLUMNS = ("cls", "sep", "first", "punctuation", "self", "previous", "next")
NUMERIC_COLUMNS = ("entropy_bits", "mean_distance") + SHARE_COLUMNS
SQUARE_ONLY = ("mean_distance", "cls", "sep", "self", "previous", "next")
