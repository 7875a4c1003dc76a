"""Low-rank matrices kept as a product ``left @ right`` and materialised only on request."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FactoredMatrix:
    """The matrix ``left @ right`` with ``left: (m, r)``, ``right: (r, n)``."""

    left: np.ndarray
    right: np.ndarray

    __array_ufunc__ = None  # make ``ndarray @ FactoredMatrix`` defer to __rmatmul__

    def __post_init__(self) -> None:
        left = np.asarray(self.left, dtype=np.float64)
        right = np.asarray(self.right, dtype=np.float64)
        if left.ndim != 2 or right.ndim != 2 or left.shape[1] != right.shape[0]:
            raise ValueError(f"factors {left.shape} and {right.shape} do not multiply")
        object.__setattr__(self, "left", left)
        object.__setattr__(self, "right", right)

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.left.shape[0]), int(self.right.shape[1]))

    @property
    def inner_dim(self) -> int:
        """The factor width: an upper bound on the rank."""
        return int(self.left.shape[1])

    def full(self) -> np.ndarray:
        """The materialised ``(m, n)`` matrix."""
        return self.left @ self.right

    @property
    def T(self) -> FactoredMatrix:  # the transpose, named as numpy names it
        return FactoredMatrix(self.right.T, self.left.T)

    def __matmul__(self, other: FactoredMatrix | np.ndarray) -> FactoredMatrix:
        """Right product; the factor width does not grow."""
        if isinstance(other, FactoredMatrix):
            return FactoredMatrix(self.left, (self.right @ other.left) @ other.right)
        return FactoredMatrix(self.left, self.right @ np.asarray(other, dtype=np.float64))

    def __rmatmul__(self, other: np.ndarray) -> FactoredMatrix:
        return FactoredMatrix(np.asarray(other, dtype=np.float64) @ self.left, self.right)

    def singular_values(self) -> np.ndarray:
        """Non-trivial singular values (at most ``inner_dim``) without forming the matrix."""
        q_left, r_left = np.linalg.qr(self.left)
        q_right, r_right = np.linalg.qr(self.right.T)
        return np.linalg.svd(r_left @ r_right.T, compute_uv=False)

    def rank(self, tol: float = 1e-9) -> int:
        """Numerical rank relative to the largest singular value."""
        s = self.singular_values()
        return int(np.sum(s > tol * max(float(s.max(initial=0.0)), 1e-300)))

    def eigenvalues(self) -> np.ndarray:
        """Non-zero spectrum of a square ``left @ right`` via the small ``right @ left``."""
        if self.shape[0] != self.shape[1]:
            raise ValueError(f"eigenvalues need a square matrix, shape is {self.shape}")
        return np.linalg.eigvals(self.right @ self.left)

    def norm(self) -> float:
        """Frobenius norm."""
        return float(np.sqrt(np.sum(self.singular_values() ** 2)))
