"""Two-dimensional layouts of a corpus job's results: the heads by how alike they attend
(metric MDS of their Jensen-Shannon distances, as Clark et al. 2019 drew BERT's heads), and one
head's queries and keys in one plane (AttentionViz, Yeh et al. 2023).

Before a head's queries and keys are projected, its keys are moved so that their mean is the
queries' mean, and both are scaled to the same mean length: a softmax over keys does not change
when every key moves by the same vector (each query's scores shift by one constant) nor when the
queries are scaled by c and the keys by 1/c, so the attention is the same while queries and keys
share the plane. PCA always; UMAP where `umap-learn` is installed.

Dimensions: N heads, S sampled tokens, Dh head width.
"""

from __future__ import annotations

import numpy as np

PCA, UMAP = "PCA", "UMAP"
LAYOUT_SEED = 0


def umap_installed() -> bool:
    try:
        import umap  # noqa: F401
    except ImportError:
        return False
    return True


def methods() -> tuple[str, ...]:
    """The point layouts this installation offers."""
    return (PCA, UMAP) if umap_installed() else (PCA,)


def heads_layout(distances: np.ndarray) -> np.ndarray:
    """(N, 2) the heads placed so that their plane distances follow `distances` (N, N)."""
    from sklearn.manifold import MDS

    if not np.isfinite(distances).all():
        raise ValueError("No passage was compared head to head, so the heads cannot be laid out.")
    return MDS(n_components=2, metric="precomputed", init="classical_mds", n_init=1,
               random_state=LAYOUT_SEED).fit_transform(distances)


def aligned(queries: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(S, Dh) queries and keys with the keys moved onto the queries' mean and both scaled to
    one mean length (see the module doc), in float64."""
    queries, keys = queries.astype(np.float64), keys.astype(np.float64)
    keys = keys - keys.mean(axis=0) + queries.mean(axis=0)
    query_length = np.linalg.norm(queries, axis=1).mean()
    key_length = np.linalg.norm(keys, axis=1).mean()
    scale = np.sqrt(key_length / query_length) if query_length > 0 and key_length > 0 else 1.0
    return queries * scale, keys / scale


def points_layout(queries: np.ndarray, keys: np.ndarray, method: str = PCA) -> np.ndarray:
    """(2S, 2): the S queries, then the S keys, in one plane."""
    together = np.concatenate(aligned(queries, keys))  # (2S, Dh)
    if method == UMAP:
        if not umap_installed():
            raise ValueError("UMAP needs the umap-learn package, which is not installed here.")
        import umap

        return umap.UMAP(n_components=2, random_state=LAYOUT_SEED).fit_transform(together)
    if method != PCA:
        raise ValueError(f"'{method}' is not a layout: use {' or '.join(methods())}.")
    from sklearn.decomposition import PCA as Projection

    if len(together) < 2:
        return np.zeros((len(together), 2))
    return Projection(n_components=2, random_state=LAYOUT_SEED).fit_transform(together)
