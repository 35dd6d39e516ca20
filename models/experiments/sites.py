"""The sites activation patching can patch, by name (models.experiments.patching). Plain names
with no import: the command line offers them without loading torch."""

RESID_PRE, ATTN_OUT, MLP_OUT = "resid_pre", "attn_out", "mlp_out"
HEAD, HEAD_POSITION, HEAD_PATTERN, HEAD_VALUES = ("head", "head_position", "head_pattern",
                                                  "head_values")
POSITION_SITES = (RESID_PRE, ATTN_OUT, MLP_OUT)  # (L, T) grids of a point (B, T, D)
HEAD_SITES = (HEAD, HEAD_PATTERN, HEAD_VALUES)  # (L, H) grids of hook_z (B, T, H, Dh)
SITES = (*POSITION_SITES, HEAD, HEAD_POSITION, HEAD_PATTERN, HEAD_VALUES)
