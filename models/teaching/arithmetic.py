"""The arithmetic behind one attention row, read from the trace of the model's own forward pass.

The trace (models/hooks/trace.py) holds every layer's query, key and value vectors as the running model
computed them (after the rotary rotation for rotary models) and each head's weighted sum of
values. `row_arithmetic` walks one row through q.k, the scaling, the mask, the softmax and the
weighted sum of values; tests check that its softmax equals the model's attention row and its
weighted sum equals the head output the model itself computed. A long input has no full trace:
`row_arithmetic_from_rows` walks the same steps from its layer's exact rows (models/hooks/long_rows.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.hooks.long_rows import ExactRows
from models.hooks.trace import Trace


@dataclass(frozen=True)
class RowArithmetic:
    """One query row of one head, step by step. Vectors are (Dh,), per-key arrays are (K,)."""

    layer: int
    head: int
    query_index: int
    query: np.ndarray  # (Dh,)
    keys: np.ndarray  # (K, Dh)
    values: np.ndarray  # (K, Dh)
    dots: np.ndarray  # (K,)  q . k_j
    scale: float  # what q.k is divided by: sqrt(d_k) for the usual scaling
    scaled: np.ndarray  # (K,) q . k_j / sqrt(d_k)
    allowed: np.ndarray  # (K,) bool mask, True = may attend
    weights: np.ndarray  # (K,) softmax over the allowed keys
    output: np.ndarray  # (Dh,) sum_j weights_j v_j
    model_output: np.ndarray  # (Dh,) what the model itself computed for this head and query
    kv_head: int = 0  # the key/value head this query head reads (grouped-query attention)
    kv_group: int = 1  # query heads per key/value head
    rotary: bool = False  # q and k are shown after the rotary position rotation


def row_arithmetic(trace: Trace, layer: int, head: int, query_index: int) -> RowArithmetic:
    """softmax(q . K^T / sqrt(d_k), masked) and the weighted sum of V for one query row."""
    kv_head = trace.kv_head(head)
    return walk_row(
        layer, head, query_index, query=trace.query[layer, head, query_index],
        keys=trace.key[layer, kv_head], values=trace.value[layer, kv_head],
        allowed=trace.allowed[query_index], scaling=trace.scaling[layer],
        model_output=trace.context[layer, head, query_index], kv_head=kv_head,
        kv_group=trace.kv_group, rotary=trace.rotary)


def row_arithmetic_from_rows(rows: ExactRows, head: int, query_index: int) -> RowArithmetic:
    """The same walk for a row of a long input, from its layer's exact rows
    (models.hooks.long_rows.exact_rows) instead of a full trace."""
    at = rows.row(query_index)
    kv_head = rows.kv_head(head)
    return walk_row(
        rows.layer, head, query_index, query=rows.query[head, at], keys=rows.key[kv_head],
        values=rows.value[kv_head], allowed=rows.allowed[at], scaling=rows.scaling,
        model_output=rows.context[head, at], kv_head=kv_head, kv_group=rows.kv_group,
        rotary=rows.rotary)


def walk_row(layer: int, head: int, query_index: int, query: np.ndarray, keys: np.ndarray,
             values: np.ndarray, allowed: np.ndarray, scaling: float, model_output: np.ndarray,
             kv_head: int = 0, kv_group: int = 1, rotary: bool = False) -> RowArithmetic:
    """One row's steps from its query (Dh,), keys and values (K, Dh), mask (K,) and scaling."""
    dots = keys @ query  # (K,)
    scaled = dots * np.float32(scaling)  # (K,)
    weights = np.zeros_like(scaled)
    if allowed.any():
        shifted = np.exp(scaled[allowed] - scaled[allowed].max())
        weights[allowed] = shifted / shifted.sum()
    return RowArithmetic(
        layer=layer, head=head, query_index=query_index, query=query, keys=keys, values=values,
        dots=dots, scale=1.0 / scaling, scaled=scaled, allowed=allowed, weights=weights,
        output=weights @ values, model_output=model_output, kv_head=kv_head, kv_group=kv_group,
        rotary=rotary,
    )


@dataclass(frozen=True)
class KeyProducts:
    """q · k for one key taken apart: the products q_d k_d, one per dimension, and their sum."""

    key_index: int
    query: np.ndarray  # (Dh,)
    key: np.ndarray  # (Dh,)
    products: np.ndarray  # (Dh,) q_d * k_d
    total: float  # sum_d q_d k_d, added up in float64
    dot: float  # q . k as the row's step 1 has it

    @property
    def difference(self) -> float:
        """|sum of the products - q . k|: float rounding only."""
        return abs(self.total - self.dot)


def key_products(row: RowArithmetic, key_index: int) -> KeyProducts:
    """The element-wise products behind one key's q · k (what bertviz's neuron view shows)."""
    if not 0 <= key_index < len(row.dots):
        raise ValueError(f"key {key_index} does not exist: the row has {len(row.dots)} keys")
    key = row.keys[key_index]  # (Dh,)
    products = row.query * key  # (Dh,)
    return KeyProducts(key_index=key_index, query=row.query, key=key, products=products,
                       total=float(products.astype(np.float64).sum()),
                       dot=float(row.dots[key_index]))


def strongest_keys(weights: np.ndarray, candidates: list[int], count: int) -> list[int]:
    """The `count` candidate keys with the largest weights, in position order."""
    chosen = np.asarray(candidates, dtype=int)
    order = np.argsort(-weights[chosen], kind="stable")[:count]
    return sorted(chosen[order].tolist())
