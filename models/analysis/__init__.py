"""Analyses of attention maps, each written once as a per-layer reducer (reducer.py: fed one
layer of a padded batch at a time, TokenBatch in token_batch.py): thumbnails, statistics, head
detectors, head roles, rollout, norm-based shares, and the Summary that runs them all. The
whole record (`reduce_record`), a streamed long input (`stream_into`, `SummaryStream`) and a
corpus batch run the same reducers. Also: the token options (merged words, hidden specials),
comparisons of two inputs, value norms, the repeated-token input and the head finder."""
