"""Independent references for the analysis reducers: each number by its definition, one cell at
a time (plain Python loops over layers, heads, rows and keys, in float64), on small hand-made
inputs; and a padded batch of such inputs with garbage in its padding.

Nothing here imports models.analysis: a reference shares no code with what it checks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from models.hooks.record import AttentionRecord

EMPTY = 1e-3  # a row summing to no more than this was emptied by a mask
PUNCTUATION = {".", ",", "!", "?", ";", "##'"}


@dataclass(frozen=True)
class Item:
    """One hand-made input: its tokens, special positions and (L, H, n, n) float32 weights."""

    tokens: tuple[str, ...]
    special: tuple[int, ...]
    weights: np.ndarray
    causal: bool

    @property
    def record(self) -> AttentionRecord:
        masks = ("causal", "padding") if self.causal else ("padding",)
        return AttentionRecord(tokens=self.tokens, weights=self.weights, source="hand",
                               masks=masks, special_positions=self.special)

    @property
    def count(self) -> int:
        return len(self.tokens)


TOKEN_CHOICES = ("a", "b", "c", ".", ",", "a", "d", "b")


def random_item(count: int, seed: int, causal: bool = False, layers: int = 3,
                heads: int = 4) -> Item:
    """`count` tokens with [CLS] first and [SEP] last (and one in the middle when long enough),
    repeated words and punctuation; random rows, a few emptied as a mask would."""
    rng = np.random.default_rng(seed)
    tokens = ["[CLS]", *rng.choice(TOKEN_CHOICES, size=count - 2).tolist(), "[SEP]"]
    special = [0, count - 1]
    if count >= 7:
        tokens[count // 2] = "[SEP]"
        special = [0, count // 2, count - 1]
    weights = rng.random((layers, heads, count, count)) ** 3
    if causal:
        weights = np.tril(weights)
    weights[0, 1, count - 2] = 0.0  # rows a mask emptied
    weights[layers - 1, heads - 1, 1] = 0.0
    weights /= np.maximum(weights.sum(-1, keepdims=True), 1e-12)
    return Item(tuple(tokens), tuple(sorted(special)), weights.astype(np.float32), causal)


def padded_maps(items: list[Item], layer: int, seed: int = 99) -> np.ndarray:
    """(B, H, T, T) layer `layer` of each item, padded on the right with random garbage (what a
    padded key or query holds must not matter)."""
    width = max(item.count for item in items)
    heads = items[0].weights.shape[1]
    maps = np.random.default_rng(seed + layer).random((len(items), heads, width, width))
    maps = maps.astype(np.float32)
    for index, item in enumerate(items):
        maps[index, :, :item.count, :item.count] = item.weights[layer]
    return maps


def live(row) -> bool:
    return sum(float(w) for w in row) > EMPTY


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def statistics(item: Item) -> dict[str, np.ndarray]:
    """name -> (L, H) every statistic by its definition."""
    layers, heads, count, _ = item.weights.shape
    names = ("entropy_bits", "mean_distance", "cls", "sep", "first", "punctuation", "self",
             "previous", "next")
    out = {name: np.zeros((layers, heads)) for name in names}
    special = list(item.special)
    punctuation = [j for j, t in enumerate(item.tokens) if t in PUNCTUATION and j not in special]
    for l in range(layers):
        for h in range(heads):
            w = item.weights[l, h].astype(np.float64)
            rows = [i for i in range(count) if live(w[i])]
            per_row = {name: [] for name in names}
            for i in rows:
                per_row["entropy_bits"].append(
                    -sum(w[i, j] * math.log2(w[i, j]) for j in range(count) if w[i, j] > 0))
                per_row["mean_distance"].append(sum(w[i, j] * abs(i - j) for j in range(count)))
                per_row["cls"].append(w[i, special[0]] if special else 0.0)
                per_row["sep"].append(sum(w[i, j] for j in special[1:]))
                per_row["first"].append(w[i, 0])
                per_row["punctuation"].append(sum(w[i, j] for j in punctuation))
                per_row["self"].append(w[i, i])
                if i >= 1:
                    per_row["previous"].append(w[i, i - 1])
                if i < count - 1:
                    per_row["next"].append(w[i, i + 1])
            for name in names:
                out[name][l, h] = mean(per_row[name])
    return out


def even_spread_bits(count: int, causal: bool) -> float:
    if causal:
        return mean([math.log2(i + 1) for i in range(count)])
    return math.log2(count)


def label(values: dict[str, float], broad_bits: float) -> str:
    """LABEL_RULES, read one head at a time."""
    patterns = [("previous", "previous-token"), ("next", "next-token"), ("self", "self"),
                ("sep", "[SEP] sink"), ("cls", "[CLS] sink"), ("punctuation", "punctuation"),
                ("first", "first-token sink")]
    best_name, best_value = None, -1.0
    for name, text in patterns:
        if not math.isnan(values[name]) and values[name] > best_value:
            best_name, best_value = text, values[name]
    if best_value >= 0.5:
        return best_name
    if broad_bits > 0 and values["entropy_bits"] >= 0.8 * broad_bits:
        return "broad"
    if values["self"] + values["previous"] + values["next"] >= 0.5:
        return "local"
    return "mixed"


def detector_scores(item: Item) -> dict[str, np.ndarray | str]:
    """name -> (L, H) every detector by its definition, or the reason it cannot measure."""
    layers, heads, count, _ = item.weights.shape
    special = set(item.special)

    def earlier_copies(i: int) -> list[int]:
        if i in special:
            return []
        return [j for j in range(i) if j not in special and item.tokens[j] == item.tokens[i]]

    def keys_of(name: str, i: int) -> list[int]:
        if name == "previous-token":
            return [i - 1] if i >= 1 else []
        if name == "first-token sink":
            return [0] if i >= 1 else []
        if name == "[SEP] sink":
            return sorted(p for p in special if p > 0)
        if name == "duplicate-token":
            return earlier_copies(i)
        return [j + 1 for j in earlier_copies(i)]  # induction

    out: dict[str, np.ndarray | str] = {}
    for name in ("previous-token", "duplicate-token", "induction", "first-token sink",
                 "[SEP] sink"):
        if name in ("previous-token", "first-token sink") and count < 2:
            out[name] = "too short"
            continue
        if name == "[SEP] sink" and not any(p > 0 for p in special):
            out[name] = "no separator"
            continue
        if name in ("duplicate-token", "induction") and not any(
                earlier_copies(i) for i in range(count)):
            out[name] = "no repeats"
            continue
        scores = np.zeros((layers, heads))
        for l in range(layers):
            for h in range(heads):
                w = item.weights[l, h].astype(np.float64)
                shares = [sum(w[i, j] for j in keys_of(name, i)) for i in range(count)
                          if keys_of(name, i) and live(w[i])]
                scores[l, h] = min(max(mean(shares), 0.0), 1.0)
        out[name] = scores
    return out


ROLE_NAMES = ("first special", "other special", "self", "previous", "next", "earlier", "later")


def roles(item: Item) -> np.ndarray:
    """(L, H, R) each head's mean weight per role, every key given its one role in order."""
    layers, heads, count, _ = item.weights.shape
    special = sorted(item.special)
    out = np.zeros((layers, heads, len(ROLE_NAMES)))
    for l in range(layers):
        for h in range(heads):
            w = item.weights[l, h].astype(np.float64)
            rows = [i for i in range(count) if live(w[i])]
            for i in rows:
                for j in range(count):
                    if special and j == special[0]:
                        role = "first special"
                    elif j in special[1:]:
                        role = "other special"
                    elif j == i:
                        role = "self"
                    elif j == i - 1:
                        role = "previous"
                    elif j == i + 1:
                        role = "next"
                    elif j < i:
                        role = "earlier"
                    else:
                        role = "later"
                    out[l, h, ROLE_NAMES.index(role)] += w[i, j]
            out[l, h] /= max(len(rows), 1)
    return out


def rollout(item: Item) -> tuple[np.ndarray, np.ndarray]:
    """(L, n, n) each layer's head average and (L, n, n) the rollout up to it."""
    layers, heads, count, _ = item.weights.shape
    averages = np.zeros((layers, count, count))
    rolled = np.zeros((layers, count, count))
    product = [[float(i == j) for j in range(count)] for i in range(count)]
    for l in range(layers):
        step = [[0.0] * count for _ in range(count)]
        for i in range(count):
            for j in range(count):
                averages[l, i, j] = sum(float(item.weights[l, h, i, j])
                                        for h in range(heads)) / heads
                step[i][j] = (averages[l, i, j] + (1.0 if i == j else 0.0)) / 2
            total = sum(step[i])
            step[i] = [value / total for value in step[i]]
        product = [[sum(step[i][m] * product[m][j] for m in range(count)) for j in range(count)]
                   for i in range(count)]
        rolled[l] = product
    return averages, rolled


def blocks(size: int, cells: int) -> list[range]:
    """The positions of each block when `size` positions are pooled into at most `cells`."""
    if size <= cells:
        return [range(i, i + 1) for i in range(size)]
    edges = [int(k * size / cells) for k in range(cells + 1)]
    return [range(edges[k], edges[k + 1]) for k in range(cells)]


def max_pooled(matrix: np.ndarray, cells: int) -> np.ndarray:
    """(q, k) the largest value of each block of a (Q, K) matrix."""
    rows, columns = blocks(matrix.shape[0], cells), blocks(matrix.shape[1], cells)
    return np.array([[max(float(matrix[i, j]) for i in row for j in column)
                      for column in columns] for row in rows])


def norm_shares(item: Item, norms: np.ndarray) -> dict[str, np.ndarray]:
    """name -> (L, H) the mean share of each norm-based row alpha_ij ||f(x_j)|| on [CLS] and on
    the other special tokens; norms (L, H, n)."""
    layers, heads, count, _ = item.weights.shape
    special = sorted(item.special)
    out = {"norm_cls": np.zeros((layers, heads)), "norm_sep": np.zeros((layers, heads))}
    for l in range(layers):
        for h in range(heads):
            cls_shares, sep_shares = [], []
            for i in range(count):
                row = [float(item.weights[l, h, i, j]) * float(norms[l, h, j])
                       for j in range(count)]
                total = sum(row)
                if total <= 0:
                    continue
                cls_shares.append(row[special[0]] / total)
                sep_shares.append(sum(row[j] for j in special[1:]) / total)
            out["norm_cls"][l, h] = mean(cls_shares)
            out["norm_sep"][l, h] = mean(sep_shares)
    return out
