"""Numerical helpers shared by every numpy re-implementation of a forward pass."""

from __future__ import annotations

import numpy as np


def softmax(logits: np.ndarray, axis: int = -1, where: np.ndarray | None = None) -> np.ndarray:
    """Softmax along `axis`, stable for large logits (the maximum is subtracted first).

    `where`, if given, is a boolean mask broadcastable to `logits`: masked-out entries get weight
    exactly 0 (as with a logit of -inf). Every slice must keep at least one entry. The dtype of
    `logits` is kept for floating inputs; integers are computed in float64.
    """
    logits = np.asarray(logits)
    if not np.issubdtype(logits.dtype, np.floating):
        logits = logits.astype(np.float64)
    if where is not None:
        logits = np.where(where, logits, -np.inf)
    shifted = np.exp(logits - logits.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis, keepdims=True)


def gram(vectors: np.ndarray) -> np.ndarray:
    """The float64 matrix of inner products of the rows of `vectors`: ``vectors @ vectors.T``.

    numpy hands ``a @ a.T`` (one buffer, transposed) to BLAS's symmetric rank-k update, and the
    threaded one in OpenBLAS 0.3.31 (numpy 2's bundled BLAS) crashes the process with a
    segmentation fault on large float64 inputs: seen at 16,463 x 700 and 16,740 x 768 on a 2-core
    machine, while 16,463 x 640 and one thread pass. Multiplying by a contiguous copy of the
    transpose takes the general product instead, at the same cost here.
    """
    rows = np.asarray(vectors, dtype=np.float64)
    return rows @ np.ascontiguousarray(rows.T)
