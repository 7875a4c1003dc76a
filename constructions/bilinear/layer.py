"""Bilinear layers ``h' = (h W + b) * (h V + c)`` and their interaction three-tensor.

With the constant appended to the input (``h~ = [h, 1]``) and the biases appended as extra rows
(``W~ = [W; b]``, ``V~ = [V; c]``), output ``o`` is the quadratic form ``h~ B[o] h~`` with
``B[o, i, j] = W~[i, o] V~[j, o]``.  Everything here is plain float64 numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class BilinearLayer:
    """Weights ``w, v: (d_in, d_hidden)`` and biases ``b, c: (d_hidden,)``."""

    w: np.ndarray
    v: np.ndarray
    b: np.ndarray
    c: np.ndarray

    @classmethod
    def without_bias(cls, w: npt.ArrayLike, v: npt.ArrayLike) -> BilinearLayer:
        w, v = np.asarray(w, dtype=np.float64), np.asarray(v, dtype=np.float64)
        return cls(w, v, np.zeros(w.shape[1]), np.zeros(v.shape[1]))

    @property
    def d_in(self) -> int:
        return int(self.w.shape[0])

    @property
    def d_hidden(self) -> int:
        return int(self.w.shape[1])

    def __call__(self, h: np.ndarray) -> np.ndarray:
        return (h @ self.w + self.b) * (h @ self.v + self.c)

    def augmented(self) -> tuple[np.ndarray, np.ndarray]:
        """``(W~, V~)``: the weights acting on ``[h, 1]``, shape ``(d_in + 1, d_hidden)``."""
        return np.vstack([self.w, self.b[None]]), np.vstack([self.v, self.c[None]])

    def tensor(self) -> np.ndarray:
        """``B[o, i, j]`` over the augmented input, shape ``(d_hidden, d_in+1, d_in+1)``."""
        return interaction_tensor(*self.augmented())


def interaction_tensor(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """``B[o, i, j] = left[i, o] * right[j, o]`` for column-per-neuron weight matrices."""
    return np.einsum("io,jo->oij", left, right)


def with_constant(h: np.ndarray) -> np.ndarray:
    """Append the constant-1 coordinate: ``h -> [h, 1]`` (batched over leading axes)."""
    h = np.asarray(h, dtype=np.float64)
    return np.concatenate([h, np.ones(h.shape[:-1] + (1,))], axis=-1)


def apply_tensor(tensor: np.ndarray, h_tilde: np.ndarray) -> np.ndarray:
    """Outputs ``h~ T[o] h~`` for every output ``o`` (``h_tilde`` batched over leading axes)."""
    return np.einsum("oij,...i,...j->...o", tensor, h_tilde, h_tilde)


def symmetrise(tensor: np.ndarray) -> np.ndarray:
    """``(B + B^T)/2`` over the two input axes: same outputs, canonical for analysis."""
    return 0.5 * (tensor + np.swapaxes(tensor, 1, 2))


def fold(tensor: np.ndarray, embed: np.ndarray, unembed: np.ndarray | None = None) -> np.ndarray:
    """``T[p, a, b] = sum U[o, p] B[o, i, j] E[a, i] E[b, j]``.

    ``embed: (d_x, d_in)`` maps model inputs to the layer's (augmented) input; without an
    unembedding the hidden index is kept: ``T[o, a, b]``.
    """
    folded = np.einsum("oij,ai,bj->oab", tensor, embed, embed)
    if unembed is None:
        return folded
    return np.einsum("oab,op->pab", folded, unembed)


def augment_embedding(embed: np.ndarray) -> np.ndarray:
    """Block-diagonal ``diag(E, 1)``: maps ``[x, 1]`` to ``[x E, 1]`` so biases survive folding."""
    d_x, d_in = embed.shape
    out = np.zeros((d_x + 1, d_in + 1))
    out[:d_x, :d_in] = embed
    out[d_x, d_in] = 1.0
    return out


@dataclass(frozen=True)
class InteractionParts:
    """Split of a bilinear layer into ``quadratic (o, i, j)`` (symmetric), ``linear (o, i)``,
    ``constant (o,)`` parts: ``out_o = h Q_o h + l_o . h + k_o``."""

    quadratic: np.ndarray
    linear: np.ndarray
    constant: np.ndarray

    def __call__(self, h: np.ndarray) -> np.ndarray:
        quad = np.einsum("oij,...i,...j->...o", self.quadratic, h, h)
        return quad + h @ self.linear.T + self.constant


def interaction_parts(layer: BilinearLayer) -> InteractionParts:
    """``hW*hV`` (quadratic), ``hW*c + b*hV`` (linear) and ``b*c`` (constant)."""
    quadratic = symmetrise(interaction_tensor(layer.w, layer.v))
    linear = (layer.w * layer.c[None]).T + (layer.v * layer.b[None]).T
    return InteractionParts(quadratic, linear, layer.b * layer.c)


def pair_coefficients(tensor: np.ndarray, output: int, i: int, j: int,
                      constant: int) -> tuple[float, float, float, float, float, float]:
    """For inputs ``x = h_i``, ``y = h_j`` (others zero) the output is
    ``xx*x^2 + yy*y^2 + xy*x*y + x1*x + y1*y + k``; returns ``(xx, yy, xy, x1, y1, k)``.

    ``constant`` is the index of the constant coordinate in the augmented input.
    """
    s = symmetrise(tensor)[output]
    return (float(s[i, i]), float(s[j, j]), float(2 * s[i, j]), float(2 * s[i, constant]),
            float(2 * s[j, constant]), float(s[constant, constant]))


def squared_neurons(linear: np.ndarray) -> BilinearLayer:
    """``(h L)^2`` as a bilinear layer with ``W = V = L`` (the square activation's relation)."""
    return BilinearLayer.without_bias(linear, linear)


def identity_layer(d: int) -> BilinearLayer:
    """``(h I + 0) * (h 0 + 1) = h``: the identity via the constant input."""
    return BilinearLayer(np.eye(d), np.zeros((d, d)), np.zeros(d), np.ones(d))
