"""Sparse readout matrices: each output reads a weighted average over a set of hidden neurons.

U-AND readouts are normalised set indicators; storing them as a dense ``(d, n_gates)`` matrix is
wasteful (and impossible for all pairs of a thousand inputs), so they are kept in a CSR-like form
and only densified when small enough to be worth a BLAS call.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

DENSE_LIMIT = 1 << 25  # entries; above this ``apply`` gathers instead of materialising


@dataclass(frozen=True, eq=False)
class SparseReadout:
    """Column ``g`` of the readout has ``values[ptr[g]:ptr[g+1]]`` at rows ``indices[...]``."""

    n_hidden: int
    indices: np.ndarray
    values: np.ndarray
    ptr: np.ndarray

    @property
    def n_outputs(self) -> int:
        return len(self.ptr) - 1

    @property
    def nnz(self) -> int:
        return int(self.ptr[-1])

    @cached_property
    def dense(self) -> np.ndarray:
        """The ``(n_hidden, n_outputs)`` matrix."""
        out = np.zeros((self.n_hidden, self.n_outputs), dtype=self.values.dtype)
        cols = np.repeat(np.arange(self.n_outputs), np.diff(self.ptr))
        out[self.indices, cols] = self.values
        return out

    def apply(self, hidden: np.ndarray, chunk: int = 1 << 24) -> np.ndarray:
        """``hidden @ dense`` for ``hidden`` of shape ``(n, n_hidden)``."""
        hidden = np.asarray(hidden)
        if self.n_hidden * self.n_outputs <= DENSE_LIMIT:
            return hidden @ self.dense
        out = np.empty((hidden.shape[0], self.n_outputs), dtype=np.result_type(hidden, self.values))
        nonempty = np.diff(self.ptr) > 0
        starts = self.ptr[:-1][nonempty]
        rows_per_chunk = max(1, chunk // max(self.nnz, 1))
        for r in range(0, hidden.shape[0], rows_per_chunk):
            prod = hidden[r:r + rows_per_chunk][:, self.indices] * self.values
            block = np.zeros((prod.shape[0], self.n_outputs), dtype=out.dtype)
            block[:, nonempty] = np.add.reduceat(prod, starts, axis=1)
            out[r:r + rows_per_chunk] = block
        return out


def from_indicator(indicator: np.ndarray, weights: np.ndarray | None = None) -> SparseReadout:
    """Readout whose column ``g`` is ``indicator[g] / indicator[g].sum()`` (or times ``weights``).

    ``indicator`` has shape ``(n_outputs, n_hidden)`` and is boolean.
    """
    indicator = np.asarray(indicator, dtype=bool)
    rows, cols = np.nonzero(indicator)  # rows = output, cols = hidden (row-major => grouped)
    counts = indicator.sum(axis=1)
    ptr = np.concatenate([[0], np.cumsum(counts)])
    if weights is None:
        values = (1.0 / np.maximum(counts, 1))[rows]
    else:
        values = np.asarray(weights)[rows, cols]
    return SparseReadout(indicator.shape[1], cols, values.astype(np.float32), ptr)


def from_sets(sets: np.ndarray, n_hidden: int) -> SparseReadout:
    """Readout averaging uniformly over fixed-size neuron sets ``sets`` of shape ``(G, t)``."""
    sets = np.sort(np.asarray(sets), axis=1)
    g, t = sets.shape
    values = np.full(g * t, 1.0 / t, dtype=np.float32)
    return SparseReadout(n_hidden, sets.ravel(), values, np.arange(0, g * t + 1, t))
