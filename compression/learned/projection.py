"""The residual projection W (D x d): initialisation and the maps it defines.

Row-vector convention as in the compiled model: a D-dimensional vector ``x`` is written to the
compressed stream as ``x @ W`` and a compressed vector ``r`` is read back as ``r @ W.T``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from compiler.errors import CompressionError
from compression.learned.config import InitMethod
from craft.numerics import gram as inner_products


def init_projection(
    key: jax.Array, residual_dim: int, d: int, method: InitMethod = "orthogonal", scale: float = 1.0
) -> jax.Array:
    """A seeded ``[residual_dim, d]`` float32 projection.

    * ``orthogonal``: orthonormal columns when ``d <= D`` (orthonormal rows when ``d > D``),
      so ``W @ W.T`` is an orthogonal projector; with ``d == D`` it is exactly invertible.
    * ``gaussian``: i.i.d. normal entries with standard deviation ``1/sqrt(d)``.
    * ``identity``: the first ``d`` columns of the D x D identity (exact when ``d == D``).
    """
    if d < 1 or residual_dim < 1:
        raise CompressionError(f"need residual_dim >= 1 and d >= 1, got {residual_dim}, {d}")
    if method == "orthogonal":
        w = jax.nn.initializers.orthogonal()(key, (residual_dim, d), jnp.float32)
    elif method == "gaussian":
        w = jax.random.normal(key, (residual_dim, d), jnp.float32) / np.sqrt(d)
    elif method == "identity":
        w = jnp.eye(residual_dim, d, dtype=jnp.float32)
    else:
        raise CompressionError(f"unknown init method {method!r}; use orthogonal, gaussian or identity")
    return (scale * w).astype(jnp.float32)


def pad_columns(projection: jax.Array | np.ndarray, width: int) -> jax.Array:
    """``projection`` (``[D, d]``) with zero columns appended up to ``width`` (itself when d >= width).

    The padded W defines the same compressed model: its extra stream coordinates stay 0 and
    ``W @ W.T`` is unchanged, so outputs and losses are the same, while every d shares one shape
    and so one compiled program.
    """
    w = jnp.asarray(projection, jnp.float32)
    return w if w.shape[1] >= width else jnp.pad(w, ((0, 0), (0, width - w.shape[1])))


def gram(projection: jax.Array | np.ndarray) -> np.ndarray:
    """The D x D matrix ``W @ W.T`` — the paper's ``WᵀW`` in its column-vector notation.

    Entry (i, j) is the inner product of features i and j after compression: the diagonal says
    how much of each feature survives, off-diagonals how much two features interfere.
    """
    return inner_products(np.asarray(projection))
