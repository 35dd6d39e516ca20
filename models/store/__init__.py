"""The byte-bounded stores that keep computed results."""
