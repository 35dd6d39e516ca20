"""Corpus mode: every head of a model measured over thousands of passages, in padded batches
through the app's own reducers, in-process or on a Ray cluster (models.corpus.job)."""
