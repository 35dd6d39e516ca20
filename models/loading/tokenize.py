"""Text (or a sentence pair) to model inputs, truncated to what the model can take."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class EncodedText:
    input_ids: torch.Tensor  # (1, T)
    attention_mask: torch.Tensor  # (1, T), 1 = real token
    token_type_ids: torch.Tensor | None  # (1, T), 0 = first sentence, 1 = second
    tokens: tuple[str, ...]
    segment_ids: tuple[int, ...]
    special_positions: tuple[int, ...]
    dropped_tokens: int

    def model_inputs(self) -> dict[str, torch.Tensor]:
        inputs = {"input_ids": self.input_ids, "attention_mask": self.attention_mask}
        if self.token_type_ids is not None:
            inputs["token_type_ids"] = self.token_type_ids
        return inputs


def encode(tokenizer, text: str, text_pair: str | None, max_tokens: int) -> EncodedText:
    """Tokenize `text` (and `text_pair`), keeping at most `max_tokens` tokens.

    Counts how many tokens truncation dropped so the page can say so.
    """
    if not text or not text.strip():
        raise ValueError("there is no text to encode")
    pair = text_pair if text_pair and text_pair.strip() else None
    encoded = tokenizer(
        text, pair, truncation=True, max_length=max_tokens, return_tensors="pt",
        return_token_type_ids=pair is not None or None, return_special_tokens_mask=True,
        verbose=False,
    )
    input_ids = encoded["input_ids"]
    full_length = input_ids.size(1)
    if full_length >= max_tokens:  # only then can truncation have dropped anything
        full_length = len(tokenizer(text, pair, truncation=False, verbose=False)["input_ids"])
    token_type_ids = encoded.get("token_type_ids")
    segment_ids = (
        tuple(int(s) for s in token_type_ids[0]) if token_type_ids is not None and pair is not None
        else (0,) * input_ids.size(1)
    )
    if pair is not None and not any(segment_ids):
        # Tokenizers without segment ids (e.g. GPT-2): mark the pair by re-encoding the first part.
        first = len(tokenizer(text, truncation=False, verbose=False)["input_ids"])
        segment_ids = tuple(int(i >= first) for i in range(input_ids.size(1)))
    special = tuple(int(i) for i, flag in enumerate(encoded["special_tokens_mask"][0]) if flag)
    return EncodedText(
        input_ids=input_ids,
        attention_mask=encoded["attention_mask"],
        token_type_ids=token_type_ids,
        tokens=tuple(tokenizer.convert_ids_to_tokens(input_ids[0].tolist())),
        segment_ids=segment_ids,
        special_positions=special,
        dropped_tokens=max(0, full_length - input_ids.size(1)),
    )


def first_item_attentions(attentions: tuple[torch.Tensor, ...]) -> np.ndarray:
    """Per-layer (B, H, Q, K) weights -> one float32 (L, H, Q, K) array for batch item 0.

    Copies each layer into one preallocated array: at 512 tokens this takes about a quarter of
    the time of torch.stack(...)[0].numpy(), which fills a (B, L, H, Q, K) tensor first.
    """
    first = attentions[0]
    weights = np.empty((len(attentions), *first.shape[1:]), dtype=np.float32)  # (L, H, Q, K)
    target = torch.from_numpy(weights)  # shares the array's memory
    for layer, layer_weights in enumerate(attentions):
        target[layer].copy_(layer_weights[0])  # (H, Q, K); torch copies with all its threads
    return weights


def encode_many(tokenizer, texts: list[str], max_tokens: int) -> list[EncodedText]:
    """`encode(tokenizer, text, None, max_tokens)` of each text, with one call of a fast
    tokenizer for all of them (a corpus's passages: the per-call work, not the tokenizing, was
    most of the plan's time); a slow tokenizer encodes them one by one."""
    if not getattr(tokenizer, "is_fast", False):
        return [encode(tokenizer, text, None, max_tokens) for text in texts]
    for text in texts:
        if not text or not text.strip():
            raise ValueError("there is no text to encode")
    if not texts:
        return []
    found = tokenizer(list(texts), truncation=True, max_length=max_tokens,
                      return_special_tokens_mask=True, verbose=False)
    types = found.get("token_type_ids")
    encoded = []
    for index, text in enumerate(texts):
        ids = found["input_ids"][index]
        full_length = len(ids)
        if full_length >= max_tokens:  # only then can truncation have dropped anything
            full_length = len(tokenizer(text, None, truncation=False, verbose=False)["input_ids"])
        input_ids = torch.tensor([ids], dtype=torch.int64)  # (1, T)
        encoded.append(EncodedText(
            input_ids=input_ids,
            attention_mask=torch.tensor([found["attention_mask"][index]], dtype=torch.int64),
            token_type_ids=None if types is None else torch.tensor([types[index]],
                                                                   dtype=torch.int64),
            tokens=tuple(tokenizer.convert_ids_to_tokens(ids)),
            segment_ids=(0,) * len(ids),
            special_positions=tuple(i for i, flag in
                                    enumerate(found["special_tokens_mask"][index]) if flag),
            dropped_tokens=max(0, full_length - len(ids))))
    return encoded
