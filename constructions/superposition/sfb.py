"""QK circuits that check skip feature-bigrams (docs/superposition.md, 'Skip feature-bigram heads').

A bigram ``(q, k)`` is present for query position ``s`` and key position ``t`` when feature
``q`` is on at ``s`` and ``k`` at ``t``. All builders return a head whose score
``x_s @ W_Q @ W_K.T @ x_t`` counts the present bigrams of the set ``B``, with explicit factors of
width ``d_qk``:

* ``exact``: one rank-one term ``f_q f_k^T`` per bigram (``d_qk = |B|``; exact when orthonormal);
* ``cliques``: one term ``(sum_Q f_q)(sum_K f_k)^T`` per complete bipartite block;
* ``random_projection``: ``M = sum_B f_q f_k^T`` compressed as ``W_Q = M G``, ``W_K = G`` with
  ``G ~ N(0, 1/d_qk)``: about one bigram per parameter, ``|B| ~ d_res d_qk``;
* ``svd``: best rank-``d_qk`` approximation of ``M`` (right for structured sets only; an
  unstructured bigram matrix has a flat spectrum).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from constructions.superposition.features import FeatureSpace
from constructions.superposition.seeding import Seed, as_generator, recorded_seed


@dataclass(frozen=True)
class SFBMeta:
    """How the head was built and what error to expect."""

    kind: str
    d_res: int
    d_qk: int
    n_bigrams: int
    n_features: int
    seed: int | None
    factor_residual: float  # max |W_Q W_K^T - M| against the full bigram matrix
    predicted_rms_absent: float  # capacity-law prediction of interference on absent pairs


@dataclass(frozen=True, eq=False)
class SFBHead:
    """Explicit ``W_Q``, ``W_K`` (``(d_res, d_qk)`` each) on a feature space."""

    features: FeatureSpace
    w_q: np.ndarray
    w_k: np.ndarray
    bigrams: np.ndarray  # (|B|, 2) feature indices (query feature, key feature)
    meta: SFBMeta
    name: str = "sfb"

    @property
    def w_qk(self) -> np.ndarray:
        return self.w_q @ self.w_k.T

    def scores(self, x_query: np.ndarray, x_key: np.ndarray) -> np.ndarray:
        """Row-wise scores of physical query/key vectors (``(n, d_res)`` each)."""
        return np.sum((x_query @ self.w_q) * (x_key @ self.w_k), axis=1)

    def head(self, w_ov=None, causal: bool = False):
        """This check as a Craft ``AttentionHead`` keeping the width-``d_qk`` factors."""
        from constructions.superposition.craft_blocks import sfb_head

        return sfb_head(self.features.space, self.w_q, self.w_k, w_ov=w_ov, name=self.name,
                        causal=causal)


def bigram_matrix(features: FeatureSpace, bigrams: np.ndarray) -> np.ndarray:
    """``M = sum_B read_q read_k^T`` (``(d_res, d_res)``), the full-rank target."""
    r = features.read.astype(np.float64)
    return r[bigrams[:, 0]].T @ r[bigrams[:, 1]]


def _finish(kind: str, features: FeatureSpace, w_q: np.ndarray, w_k: np.ndarray,
            bigrams: np.ndarray, seed: int | None, predicted: float, name: str) -> SFBHead:
    residual = float(np.abs(w_q @ w_k.T - bigram_matrix(features, bigrams)).max())
    meta = SFBMeta(kind, features.n_dims, w_q.shape[1], len(bigrams), features.n_features, seed,
                   residual, predicted)
    return SFBHead(features, w_q, w_k, bigrams, meta, name)


def build_sfb_exact(features: FeatureSpace, bigrams: np.ndarray, name: str = "sfb") -> SFBHead:
    """One rank-one term per bigram: ``W_Q = [f_q]``, ``W_K = [f_k]``, ``d_qk = |B|``."""
    bigrams = np.asarray(bigrams, dtype=np.int64)
    r = features.read.astype(np.float64)
    coh = features.coherence()
    return _finish("exact", features, r[bigrams[:, 0]].T, r[bigrams[:, 1]].T, bigrams, None,
                   coh.rms * math.sqrt(len(bigrams)), name)


def build_sfb_cliques(features: FeatureSpace, cliques: Sequence[tuple[Sequence[int], Sequence[int]]],
                      name: str = "sfb") -> SFBHead:
    """One term ``(sum_{Q_c} f_q)(sum_{K_c} f_k)^T`` per block ``(Q_c, K_c)``; rank = #blocks.

    The metadata's prediction is the source's absent-pair estimate ``sqrt(d_qk |K||Q|)/d_res``
    (for blocks of equal size), which ignores the one-feature-present term.
    """
    r = features.read.astype(np.float64)
    w_q = np.stack([r[list(q)].sum(axis=0) for q, _ in cliques], axis=1)
    w_k = np.stack([r[list(k)].sum(axis=0) for _, k in cliques], axis=1)
    bigrams = np.array([(a, b) for q, k in cliques for a in q for b in k], dtype=np.int64)
    sizes = np.array([math.sqrt(len(q) * len(k)) for q, k in cliques])
    predicted = 0.0 if features.basis_aligned else float(
        math.sqrt(np.sum(sizes**2)) / features.n_dims)
    return _finish("cliques", features, w_q, w_k, bigrams, None, predicted, name)


def build_sfb_random_projection(features: FeatureSpace, bigrams: np.ndarray, d_qk: int, seed: Seed,
                                name: str = "sfb") -> SFBHead:
    """``W_Q = M G``, ``W_K = G`` with ``G`` of shape ``(d_res, d_qk)``, entries ``N(0, 1/d_qk)``.

    Predicted rms interference on absent pairs: ``1.1 sqrt(|B| / (d_res d_qk))``.
    """
    bigrams = np.asarray(bigrams, dtype=np.int64)
    rng = as_generator(seed)
    g = rng.standard_normal((features.n_dims, d_qk)) / math.sqrt(d_qk)
    m = bigram_matrix(features, bigrams)
    predicted = 1.1 * math.sqrt(len(bigrams) / (features.n_dims * d_qk))
    return _finish("random_projection", features, m @ g, g, bigrams, recorded_seed(seed),
                   predicted, name)


def build_sfb_svd(features: FeatureSpace, bigrams: np.ndarray, d_qk: int, name: str = "sfb") -> SFBHead:
    """Truncated SVD ``W_Q = U_h S_h^{1/2}``, ``W_K = V_h S_h^{1/2}`` of the bigram matrix.

    The prediction recorded is the rms of the discarded singular values spread over the
    ``d_res^2`` entries (the Frobenius error per entry).
    """
    bigrams = np.asarray(bigrams, dtype=np.int64)
    m = bigram_matrix(features, bigrams)
    u, s, vt = np.linalg.svd(m)
    root = np.sqrt(s[:d_qk])
    predicted = float(np.sqrt(np.sum(s[d_qk:] ** 2)) / features.n_dims)
    return _finish("svd", features, u[:, :d_qk] * root, vt[:d_qk].T * root, bigrams, None,
                   predicted, name)


def random_bigrams(n_features: int, n_bigrams: int, seed: Seed) -> np.ndarray:
    """``n_bigrams`` distinct ordered ``(query, key)`` feature pairs (query may equal key)."""
    rng = as_generator(seed)
    if n_bigrams > n_features**2:
        raise ValueError("more bigrams requested than ordered pairs exist")
    flat = rng.choice(n_features * n_features, size=n_bigrams, replace=False)
    return np.stack([flat // n_features, flat % n_features], axis=1)


def disjoint_cliques(n_features: int, n_cliques: int, size: int, seed: Seed, *,
                     shared_roles: bool = False) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n_cliques`` edge-disjoint blocks ``Q_c x K_c`` of ``size x size`` on random features.

    By default every feature is in at most one block on either side. With ``shared_roles`` the
    query blocks and the key blocks are drawn independently (a feature may be a query in one block
    and a key in another), which fits ``n_cliques * size`` up to ``n_features``.
    """
    rng = as_generator(seed)
    if shared_roles:
        if n_cliques * size > n_features:
            raise ValueError(f"{n_cliques} blocks of size {size} need {n_cliques * size} features")
        q = rng.permutation(n_features)[:n_cliques * size].reshape(n_cliques, size)
        k = rng.permutation(n_features)[:n_cliques * size].reshape(n_cliques, size)
        return list(zip(q, k))
    need = 2 * n_cliques * size
    if need > n_features:
        raise ValueError(f"{n_cliques} cliques of {size}x{size} need {need} features, have {n_features}")
    perm = rng.permutation(n_features)[:need].reshape(n_cliques, 2, size)
    return [(blk[0], blk[1]) for blk in perm]
