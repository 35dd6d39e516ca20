"""The lessons' keys and titles, in order: what the start page lists without importing the
lessons' figures (and the training code behind them); ui/lesson_content.py takes its titles
from here."""

TITLES = {
    "scratch": "Attention from scratch, and many heads",
    "scaling": "Why attention is scaled",
    "masks": "Masks: causal and padding",
    "span": "Adaptive attention span",
    "seq2seq": "Encoder–decoder: translating",
    "finetune": "Fine-tuning a classifier",
    "interventions": "Causal interventions: which parts change the answer",
    "block": "Positions and the encoder block",
    "bert": "BERT's pretraining",
    "output": "The output layer and its loss",
}
