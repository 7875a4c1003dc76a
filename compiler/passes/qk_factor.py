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

Whichever of the two has fewer non-zeros is used per component.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components


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
    blocks: dict[tuple[int, int], int] = {}  # (start, size) -> factor column
    query_blocks = []
    for length in lengths.tolist():
        start, mine = 0, []
        for bit in reversed(range(max(int(length).bit_length(), 1))):
            size = 1 << bit
            if length & size:
                mine.append(blocks.setdefault((start, size), len(blocks)))
                start += size
        query_blocks.append(mine)
    a = np.zeros((len(lengths), len(blocks)), dtype=dtype)
    b = np.zeros((len(order), len(blocks)), dtype=dtype)
    for query, mine in enumerate(query_blocks):
        a[query, mine] = c
    for (start, size), column in blocks.items():
        b[order[start : start + size], column] = 1
    return a, b


def _component_factors(block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    plain = _identity_factors(block)
    stairs = _staircase(block)
    if stairs is None:
        return plain
    dyadic = _dyadic_factors(*stairs, dtype=block.dtype)
    if sum(np.count_nonzero(f) for f in dyadic) < sum(np.count_nonzero(f) for f in plain):
        return dyadic
    return plain


def sparse_factors(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact factors `A` (queries x d) and `B` (keys x d) with `A @ B.T == matrix`."""
    rows, cols = matrix.shape
    nonzero_rows, nonzero_cols = np.nonzero(matrix)
    if nonzero_rows.size == 0:
        return _identity_factors(matrix)
    graph = coo_matrix(
        (np.ones(nonzero_rows.size), (nonzero_rows, rows + nonzero_cols)), shape=(rows + cols,) * 2
    )
    _, component = connected_components(graph, directed=False)
    parts = []
    for label in np.unique(component[nonzero_rows]):
        q = np.flatnonzero(component[:rows] == label)
        k = np.flatnonzero(component[rows:] == label)
        parts.append((q, k, *_component_factors(matrix[np.ix_(q, k)])))
    width = sum(a.shape[1] for _, _, a, _ in parts)
    a_all = np.zeros((rows, width), dtype=matrix.dtype)
    b_all = np.zeros((cols, width), dtype=matrix.dtype)
    offset = 0
    for q, k, a, b in parts:
        a_all[np.ix_(q, np.arange(offset, offset + a.shape[1]))] = a
        b_all[np.ix_(k, np.arange(offset, offset + b.shape[1]))] = b
        offset += a.shape[1]
    return a_all, b_all
