"""Token labels that are safe to put into Plotly text (which understands a little HTML).

Byte-level BPE tokenizers (GPT-2, Llama 3, SmolLM2) write each byte as a printable stand-in
character: "Ġ" for a space, "Ċ" for a newline, "Ã©" for the two bytes of "é". Labels show the
text those bytes spell instead; the record keeps the tokens exactly as the tokenizer wrote them.
"""

from __future__ import annotations

import html
from functools import lru_cache


BYTE_LEVEL_MARKERS = ("Ġ", "Ċ")  # a space, a newline: present in almost any byte-level text
WORD_START = "▁"  # SentencePiece (T5, Llama 2, ALBERT) writes a space before a word as U+2581


@lru_cache(maxsize=1)
def _byte_of_character() -> dict[str, int]:
    """The byte-level BPE alphabet: printable Latin-1 bytes stand for themselves, and the other
    bytes (controls, space, a few others) take the characters from U+0100 upwards, in order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    mapping = {chr(b): b for b in printable}
    extra = 0
    for byte in range(256):
        if byte not in printable:
            mapping[chr(256 + extra)] = byte
            extra += 1
    return mapping


def byte_level_text(token: str) -> str:
    """The text a byte-level token spells; unchanged if it is not made of that alphabet."""
    alphabet = _byte_of_character()
    if not all(character in alphabet for character in token):
        return token
    return bytes(alphabet[c] for c in token).decode("utf-8", errors="replace")


def display_tokens(tokens: tuple[str, ...] | list[str]) -> list[str]:
    """Tokens as a reader expects them, as words: byte-level stand-ins decoded (GPT-2, SmolLM2:
    "ĠParis" -> "Paris"), SentencePiece's word marker dropped ("▁Paris" -> "Paris"), leading
    spaces dropped, a newline shown as ↵. WordPiece tokens (BERT: "jump", "##ing") are words
    already and stay as they are. The one place tokens become the words a person reads."""
    if any(marker in token for token in tokens for marker in BYTE_LEVEL_MARKERS):
        decode = byte_level_text
    elif any(WORD_START in token for token in tokens):
        def decode(token: str) -> str:
            return token.replace(WORD_START, " ")
    else:
        return list(tokens)
    shown = []
    for token in tokens:
        text = decode(token).replace("\n", "↵")
        shown.append(text.strip(" ") or text)
    return shown


def token_text(token: str, context: tuple[str, ...] | list[str] = ()) -> str:
    """One token as a word (read with the other tokens of its input, `context`, which tell
    whether the tokenizer writes byte-level stand-ins)."""
    return display_tokens([token, *context])[0]


def raw_differs(tokens: tuple[str, ...] | list[str]) -> bool:
    """Whether any token reads differently as a word than as the tokenizer wrote it."""
    return display_tokens(tokens) != list(tokens)


def raw_hover(tokens: tuple[str, ...] | list[str]) -> list[str]:
    """Each token as the tokenizer wrote it, escaped, for a hover ("ĠParis")."""
    return [html.escape(token, quote=False) or "␣" for token in tokens]


def safe_token(token: str) -> str:
    """Escape HTML and make invisible tokens visible, so what the user typed is shown as text."""
    if token == "" or token.isspace():
        return "␣"
    return html.escape(token, quote=False)


def tick_labels(tokens: tuple[str, ...] | list[str]) -> list[str]:
    return [safe_token(t) for t in display_tokens(tokens)]


def numbered_labels(tokens: tuple[str, ...] | list[str], start: int = 0) -> list[str]:
    """"token #position" labels, distinct even when a token repeats; positions count from
    `start` (a window of a long input keeps its tokens' own positions)."""
    return [f"{label} #{i}" for i, label in enumerate(tick_labels(tokens), start)]
