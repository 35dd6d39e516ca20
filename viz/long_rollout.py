"""Attention rollout of a long input, taken layer by layer as a streamed forward computes it.

viz.rollout multiplies every layer's residual attention from a full record: L maps of T x T
floats at once. Here each layer's (H, T, T) maps are folded into the running product as they
arrive (`RolloutStream.add`), so one (T, T) product and the layer's step are all that is alive,
and each layer keeps only max-pooled pictures of its head-averaged map and of the rollout up to
it (viz.overview.max_pool: a block shows its largest value). The arithmetic is that of
`residual_attention` and `attention_rollout`: Â_l = rownorm((mean_h A_l,h + I) / 2) (a row a mask
emptied becomes the identity's), rollout_l = Â_l · rollout_(l-1), in float32.

A causal decoder's steps are lower-triangular, and so is their product; its blocks above the
diagonal are then never multiplied (about a third of the work of a full product remains).

Dimensions: L layers, H heads, Q/K query/key positions (Q == K == T), c pooled cells a side.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from viz import style
from viz.labels import tick_labels
from viz.long_view import POOLED_CELLS, _ranges, _tick_values, colour_top
from viz.overview import block_edges

SMALLEST_SPLIT = 512  # products of at most this many rows are taken whole
LONG_ROLLOUT_HEIGHT_PX = 520  # two maps side by side across the page: as tall as they are wide

POOLED_ROLLOUT_HOVER = ("queries %{{customdata[0]}}<br>keys %{{customdata[1]}}<br>"
                        "largest {value} %{{z:.4g}}<extra></extra>")  # .format(value=...)


def multiply_into(step: np.ndarray, product: np.ndarray) -> None:
    """product <- step @ product, in place, for square float32 (n, n) matrices.

    When the blocks above the diagonal of both halves are zero (lower-triangular matrices, as a
    causal model's are), the product is taken by blocks, C21 = A21 B11 + A22 B21 and
    C11, C22 recursively, C12 = 0: no full-size temporary and about a third of the arithmetic.
    Otherwise it is one matrix product.
    """
    size = step.shape[0]
    half = size // 2
    if size <= SMALLEST_SPLIT or step[:half, half:].any() or product[:half, half:].any():
        product[...] = step @ product  # (n, n)
        return
    lower = step[half:, :half] @ product[:half, :half]  # (n - h, h), before B11 and B21 change
    lower += step[half:, half:] @ product[half:, :half]
    product[half:, :half] = lower
    multiply_into(step[half:, half:], product[half:, half:])
    multiply_into(step[:half, :half], product[:half, :half])


class RolloutStream:
    """The rollout of one input, fed one layer's (H, Q, K) maps at a time, in layer order.

    Keeps per layer the max-pooled (min(cells, T) blocks a side) head-averaged map and the
    max-pooled rollout up to that layer (`raw_pooled`, `rolled_pooled`: (L, c, c) float32), and
    the exact rollout up to the last layer added (`final`: (Q, K) float32). `nbytes` counts the
    pooled maps (the part kept per layer); `final` adds T * T * 4 bytes.
    """

    def __init__(self, num_tokens: int, cells: int = POOLED_CELLS):
        if num_tokens < 1 or cells < 1:
            raise ValueError("a rollout needs at least one token and one cell")
        self.num_tokens = num_tokens
        self.cells = cells
        self._product: np.ndarray | None = None  # (Q, K) float32
        self._raw: list[np.ndarray] = []  # (c, c) float32 per layer
        self._rolled: list[np.ndarray] = []

    def add(self, maps: np.ndarray) -> None:
        """Fold the next layer's (H, Q, K) weights (read only; not kept) into the rollout."""
        heads, queries, keys = maps.shape
        if queries != self.num_tokens or keys != self.num_tokens:
            raise ValueError(f"maps shaped {maps.shape} for a rollout over {self.num_tokens} tokens")
        step = maps.sum(axis=0, dtype=np.float32)  # (Q, K)
        step /= heads  # the heads' mean
        self._raw.append(self._pooled(step))
        step.flat[::queries + 1] += 1.0  # + I (the halving cancels in the row normalisation)
        step /= step.sum(axis=-1, keepdims=True)
        if self._product is None:
            self._product = step
        else:
            multiply_into(step, self._product)
        self._rolled.append(self._pooled(self._product))

    def _pooled(self, matrix: np.ndarray) -> np.ndarray:
        """(c, c) a copy of `max_pool(matrix, cells)`, pooling the query blocks first (the
        elementwise maximum of a block's whole rows, one fast pass over the matrix), then the
        key blocks of only c rows; a maximum is exact in any order."""
        size = matrix.shape[0]
        if size <= self.cells:
            return matrix.copy()
        edges = block_edges(size, self.cells)
        rows = np.empty((len(edges), size), dtype=np.float32)  # (c, K)
        for index, (start, end) in enumerate(zip(edges, [*edges[1:], size])):
            np.max(matrix[start:end], axis=0, out=rows[index])
        return np.maximum.reduceat(rows, edges, axis=1)  # (c, c)

    @property
    def num_layers(self) -> int:
        return len(self._raw)

    @property
    def raw_pooled(self) -> np.ndarray:
        """(L, c, c) each layer's head-averaged map, max-pooled."""
        return self._stacked(self._raw)

    @property
    def rolled_pooled(self) -> np.ndarray:
        """(L, c, c) the rollout up to each layer, max-pooled."""
        return self._stacked(self._rolled)

    @property
    def final(self) -> np.ndarray:
        """(Q, K) the exact rollout up to the last layer added (a read-only view)."""
        if self._product is None:
            raise ValueError("no layer has been added to the rollout yet")
        view = self._product.view()
        view.setflags(write=False)
        return view

    @property
    def nbytes(self) -> int:
        return sum(pooled.nbytes for pooled in self._raw + self._rolled)

    def _stacked(self, pooled: list[np.ndarray]) -> np.ndarray:
        if not pooled:
            raise ValueError("no layer has been added to the rollout yet")
        return np.stack(pooled)


def _block_labels(num_tokens: int, tokens, cells: int) -> list[str]:
    """Each block's token range and its first and last tokens (escaped), e.g. "16–31 (the … cat)"."""
    labels = tick_labels(tuple(tokens))
    named = []
    for block in _ranges(num_tokens, cells):
        first, _, last = block.partition("–")
        words = labels[int(first)] + (f" … {labels[int(last)]}" if last else "")
        named.append(f"{block} ({words})")
    return named


def _pooled_figure(pooled: np.ndarray, num_tokens: int, tokens, title: str,
                   value: str) -> go.Figure:
    """One pooled (c, c) map: block ranges on the axes and in the hover, coloured from 0 to the
    map's `colour_top`."""
    cells = pooled.shape[0]
    blocks = _block_labels(num_tokens, tokens, cells)
    names = np.array(blocks, dtype=object)
    customdata = np.stack(np.broadcast_arrays(names[:, None], names[None, :]), axis=-1)  # (c, c, 2)
    ticks = _tick_values(cells)
    ticktext = [blocks[i].split("–")[0].split(" ")[0] for i in ticks]
    if cells < num_tokens:
        block = num_tokens / cells
        title += (f"<br><sup>max-pooled: each cell is the largest {value} of {block:.0f} × "
                  f"{block:.0f} tokens</sup>")
    figure = go.Figure(go.Heatmap(
        z=pooled, customdata=customdata, hovertemplate=POOLED_ROLLOUT_HOVER.format(value=value),
        colorscale=style.COLORSCALE, zmin=0.0, zmax=colour_top(pooled, cells),
        # under the map: two maps share the page's width, and a bar beside each takes a third
        colorbar=dict(title=dict(text=value, side="right"), orientation="h", thickness=12,
                      len=0.9, y=-0.02, yanchor="top"),
    ))
    side = style.heatmap_size(cells)
    figure.update_layout(
        title=dict(text=title), font=style.FONT,
        width=side, height=LONG_ROLLOUT_HEIGHT_PX,
        margin=dict(style.HEATMAP_MARGIN, b=60), plot_bgcolor="white",
        xaxis=dict(title=None, side="top", showgrid=False, zeroline=False,
                   tickmode="array", tickvals=ticks, ticktext=ticktext),
        yaxis=dict(title="query block", autorange="reversed", showgrid=False, zeroline=False,
                   scaleanchor="x", tickmode="array", tickvals=ticks, ticktext=ticktext,
                   constrain="domain", constraintoward="top"),
    )
    return figure


def long_rollout_figures(raw_pooled_layer: np.ndarray, rolled_pooled_layer: np.ndarray,
                         num_tokens: int, layer: int, tokens) -> tuple[go.Figure, go.Figure]:
    """(head-averaged attention of `layer`, rollout up to `layer`) of a long input, each from
    its max-pooled (c, c) map (`RolloutStream.raw_pooled[layer]`, `.rolled_pooled[layer]`),
    sized to stand side by side like `rollout_figures`; the hover names each block's tokens."""
    if len(tokens) != num_tokens:
        raise ValueError(f"{len(tokens)} tokens for an input of {num_tokens}")
    return (
        _pooled_figure(raw_pooled_layer, num_tokens, tokens,
                       f"Raw attention · layer {layer}", "weight"),
        _pooled_figure(rolled_pooled_layer, num_tokens, tokens,
                       f"Rollout · layers 0 to {layer}", "share"),
    )
