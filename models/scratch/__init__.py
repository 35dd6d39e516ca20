"""The textbook models, built as the chapters build them: embeddings, attention, the encoder and the encoder-decoder, adaptive span."""
