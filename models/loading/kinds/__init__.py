"""The registry of model kinds. A kind is one file here defining its `KindSpec` (value for links,
title, whether it is causal, offered in the sidebar, seeded, built from scratch; how it is
labelled, captioned and loaded) and one line in `BUILT_IN` below.

`models.loading.source.ModelSource(kind, name, seed)` holds a registered value; `spec(value)`
answers what every page, cache and link needs to know about it.
"""

from models.loading.kinds.base import (DECODER_NAMES, ENCODER_NAMES, KindSpec, Loaders,
                                       default_kind, offered, register, registered, spec,
                                       unregister)
from models.loading.kinds.classifier import CLASSIFIER, TrainingNames
from models.loading.kinds.decoder import DECODER
from models.loading.kinds.masked_lm import MASKED_LM
from models.loading.kinds.pretrained import PRETRAINED
from models.loading.kinds.scratch_copied import SCRATCH_COPIED
from models.loading.kinds.scratch_random import SCRATCH_RANDOM
from models.loading.kinds.seq2seq import SEQ2SEQ

BUILT_IN = (PRETRAINED, DECODER, SCRATCH_RANDOM, SCRATCH_COPIED, SEQ2SEQ, CLASSIFIER, MASKED_LM)
for _kind in BUILT_IN:
    register(_kind)

__all__ = ["BUILT_IN", "CLASSIFIER", "DECODER", "DECODER_NAMES", "ENCODER_NAMES", "MASKED_LM", "PRETRAINED",
           "SCRATCH_COPIED", "SCRATCH_RANDOM", "SEQ2SEQ", "KindSpec", "Loaders", "TrainingNames",
           "default_kind", "offered", "register", "registered", "spec", "unregister"]
