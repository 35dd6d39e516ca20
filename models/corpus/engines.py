"""Where a corpus job runs (models.corpus.job): in this process, or on Ray. Plain names with no
import: the command line offers them without loading torch."""

LOCAL, RAY = "local", "ray"
ENGINES = (LOCAL, RAY)
