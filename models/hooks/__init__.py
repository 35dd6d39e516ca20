"""Named hook points on every model, the one run that reads and edits them, and the trace it leaves."""
