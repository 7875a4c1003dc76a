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
