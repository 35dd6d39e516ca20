"""Errors a user can act on: each message is one sentence, naming what failed and why."""

from __future__ import annotations


class ModelLoadError(Exception):
    """A model could not be loaded; the message is one sentence a user can act on."""


class UnsupportedModelType(ModelLoadError):
    """The model exists and was read, but its architecture is not one this loader takes."""


def first_sentence(error: Exception) -> str:
    """The first sentence of an exception's message, at most 300 characters, ending with '.'."""
    text = " ".join(str(error).split()) or type(error).__name__
    sentence = text.split(". ")[0].rstrip(".")
    return sentence[:300] + "."
