"""One-layer attention-only models (no layer norm, biases or positions) in numpy.

Row-vector convention: ``W_E: (T, d_model)``, ``W_U: (d_model, T)``, per head
``W_Q, W_K: (d_model, d_qk)``, ``W_V: (d_model, d_vo)``, ``W_O: (d_vo, d_model)``.
Scores are not scaled.  :class:`TokenCircuits` holds the token-level matrices that the
database-tensor formulas need, so layers given only by circuits can be analysed too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from craft.numerics import softmax


@dataclass(frozen=True)
class AttentionLayer:
    """Factored weights of a single attention-only layer; head axis first."""

    w_e: np.ndarray
    w_u: np.ndarray
    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray
    w_o: np.ndarray

    @property
    def n_heads(self) -> int:
        return int(self.w_q.shape[0])

    @property
    def d_model(self) -> int:
        return int(self.w_e.shape[1])

    @property
    def d_qk(self) -> int:
        return int(self.w_q.shape[2])

    @property
    def d_vo(self) -> int:
        return int(self.w_v.shape[2])

    @property
    def vocab_size(self) -> int:
        return int(self.w_e.shape[0])

    def logits(self, tokens: np.ndarray) -> np.ndarray:
        """Causal forward pass on token ids ``(n,)`` -> logits ``(n, T)``."""
        x = self.w_e[np.asarray(tokens)]
        n = x.shape[0]
        out = x.copy()
        mask = np.tril(np.ones((n, n), dtype=bool))
        for h in range(self.n_heads):
            scores = (x @ self.w_q[h]) @ (x @ self.w_k[h]).T
            pattern = softmax(scores, where=mask)
            out = out + pattern @ x @ self.w_v[h] @ self.w_o[h]
        return out @ self.w_u


def random_layer(vocab_size: int, d_model: int, n_heads: int, d_qk: int, d_vo: int,
                 seed: int) -> AttentionLayer:
    """Gaussian weights with variance ``1/fan_in`` (the reproduction's initialisation)."""
    rng = np.random.default_rng(seed)

    def draw(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape) / np.sqrt(shape[-2])

    return AttentionLayer(
        w_e=rng.standard_normal((vocab_size, d_model)),
        w_u=draw(d_model, vocab_size),
        w_q=draw(n_heads, d_model, d_qk),
        w_k=draw(n_heads, d_model, d_qk),
        w_v=draw(n_heads, d_model, d_vo),
        w_o=draw(n_heads, d_vo, d_model),
    )


@dataclass(frozen=True)
class TokenCircuits:
    """Token-level circuits: ``w_eu (T, T)``, ``w_qk (H, T, T)`` (query rows), ``w_vo (H, T, T)``."""

    w_eu: np.ndarray
    w_qk: np.ndarray
    w_vo: np.ndarray

    @classmethod
    def from_layer(cls, layer: AttentionLayer) -> TokenCircuits:
        e = layer.w_e
        qk = np.stack([e @ layer.w_q[h] @ layer.w_k[h].T @ e.T for h in range(layer.n_heads)])
        vo = np.stack([e @ layer.w_v[h] @ layer.w_o[h] @ layer.w_u
                       for h in range(layer.n_heads)])
        return cls(w_eu=e @ layer.w_u, w_qk=qk, w_vo=vo)

    @property
    def n_heads(self) -> int:
        return int(self.w_qk.shape[0])

    def logits(self, tokens: np.ndarray) -> np.ndarray:
        """Causal forward pass through the token circuits (identical to the factored one)."""
        tokens = np.asarray(tokens)
        n = len(tokens)
        mask = np.tril(np.ones((n, n), dtype=bool))
        out = self.w_eu[tokens].copy()
        for h in range(self.n_heads):
            pattern = softmax(self.w_qk[h][np.ix_(tokens, tokens)], where=mask)
            out = out + pattern @ self.w_vo[h][tokens]
        return out
