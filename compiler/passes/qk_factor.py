"""Exact sparse factors `W_QK = A @ B.T` for a head's query-key matrix.

The score matrix of a head is split into the connected components of its non-zero pattern
(queries and keys that interact). Each component is factored on its own and the factors are
stacked block-diagonally, so a component never pays for another's rows or columns:

- by default as `A = I, B = Sᵀ` (or `A = S, B = I`), the narrower way; exact;
- a *staircase* component, where every non-zero has one value `c` and, with the keys in a
  suitable order, every query selects a prefix of them (an order comparison such as
  `Select(keys, keys, LT)` over sortable values), as a dyadic cover: a key belongs to the
  aligned power-of-two blocks of key positions that some prefix uses, and a query's prefix of
  length `L` is the union of the blocks given by the binary digits of `L`. The blocks of one
  prefix are disjoint, so every score is one product `c * 1` or zero: exact in floating point.
  `m` keys cost `O(m log m)` non-zeros instead of `O(m^2)`.

Whichever of the two has fewer non-zeros is used per component. A scipy.sparse input (a large
head, see `craft.maps.SPARSE_ABOVE`) gives sparse factors, and is never made dense as a whole.
"""

from __future__ import annotations

from typing import cast

import numpy as np
from scipy import sparse
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from craft.maps import dyadic_prefix_factors


def _identity_factors(block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows, cols = block.shape
    if rows <= cols:
        return np.eye(rows, dtype=block.dtype), block.T.copy()
    return block.copy(), np.eye(cols, dtype=block.dtype)


def _staircase(block: np.ndarray) -> tuple[np.ndarray, np.ndarray, float] | None:
    """`(key order, prefix length per query, c)` when `block` is a one-valued staircase."""
    values = block[block != 0]
    if values.size == 0 or not np.all(values == values[0]):
        return None
    mask = block != 0
    order = np.argsort(-mask.sum(axis=0), kind="stable")  # most-selected keys first
    lengths = mask.sum(axis=1)
    ordered = mask[:, order]
    prefix = np.arange(block.shape[1])[None, :] < lengths[:, None]
    if not np.array_equal(ordered, prefix):
        return None
    return order, lengths, float(values[0])


def _dyadic_factors(order: np.ndarray, lengths: np.ndarray, c: float, dtype) -> tuple[np.ndarray, np.ndarray]:
    a, b = dyadic_prefix_factors(order, lengths, c)
    return a.toarray().astype(dtype), b.toarray().astype(dtype)


def _component_factors(block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    plain = _identity_factors(block)
    stairs = _staircase(block)
    if stairs is None:
        return plain
    dyadic = _dyadic_factors(*stairs, dtype=block.dtype)
    if sum(np.count_nonzero(f) for f in dyadic) < sum(np.count_nonzero(f) for f in plain):
        return dyadic
    return plain


def sparse_factors(matrix: np.ndarray | sparse.sparray) -> tuple[np.ndarray, np.ndarray] | tuple[sparse.csr_array, sparse.csr_array]:
    """Exact factors `A` (queries x d) and `B` (keys x d) with `A @ B.T == matrix`.

    Dense in, dense out; sparse in, sparse out (components are made dense one at a time).
    """
    is_sparse = sparse.issparse(matrix)
    if is_sparse:
        matrix = sparse.csr_array(matrix)
        matrix.eliminate_zeros()
    rows, cols = matrix.shape
    nonzero_rows, nonzero_cols = matrix.nonzero()
    if nonzero_rows.size == 0:
        a, b = _identity_factors(cast(sparse.csr_array, matrix).toarray() if is_sparse else matrix)
        return (sparse.csr_array(a), sparse.csr_array(b)) if is_sparse else (a, b)
    graph = coo_matrix(
        (np.ones(nonzero_rows.size), (nonzero_rows, rows + nonzero_cols)), shape=(rows + cols,) * 2
    )
    _, component = connected_components(graph, directed=False)
    parts = []
    for label in np.unique(component[nonzero_rows]):
        q = np.flatnonzero(component[:rows] == label)
        k = np.flatnonzero(component[rows:] == label)
        block = cast(sparse.csr_array, matrix)[q][:, k].toarray() if is_sparse else matrix[np.ix_(q, k)]
        parts.append((q, k, *_component_factors(block)))
    width = sum(a.shape[1] for _, _, a, _ in parts)
    if is_sparse:
        return _stacked_sparse(parts, rows, 0, width), _stacked_sparse(parts, cols, 1, width)
    a_all = np.zeros((rows, width), dtype=matrix.dtype)
    b_all = np.zeros((cols, width), dtype=matrix.dtype)
    offset = 0
    for q, k, a, b in parts:
        a_all[np.ix_(q, np.arange(offset, offset + a.shape[1]))] = a
        b_all[np.ix_(k, np.arange(offset, offset + b.shape[1]))] = b
        offset += a.shape[1]
    return a_all, b_all


def _stacked_sparse(parts: list, size: int, side: int, width: int) -> sparse.csr_array:
    """The components' factors of one side (0: queries, 1: keys) placed block-diagonally."""
    data, row_idx, col_idx = [], [], []
    offset = 0
    for part in parts:
        where, factor = part[side], part[2 + side]
        r, c = np.nonzero(factor)
        data.append(factor[r, c])
        row_idx.append(where[r])
        col_idx.append(c + offset)
        offset += factor.shape[1]
    return sparse.csr_array(
        (np.concatenate(data), (np.concatenate(row_idx), np.concatenate(col_idx))), shape=(size, width)
    )
