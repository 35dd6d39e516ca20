"""Runs that change or extend a forward pass: ablation and knockout, predictions, generation, the fine-tuned classifier."""
