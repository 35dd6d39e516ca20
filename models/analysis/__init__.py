"""Per-layer analyses of attention maps: statistics, detectors, roles, rollout, thumbnails, norms, the head finder."""
