"""Codes for mutually exclusive values: n unit vectors in k dimensions with small overlaps.

Only one value of a categorical s-op is on at a position, so its n value directions need not be
orthogonal: a thresholded reader of value i sees ``<w_i, w_j>`` when value j is on, and tolerates
anything below its margin. With ``one_sided`` codes only the largest *positive* overlap counts
(a negative read pushes a ReLU threshold further off), so 2k values fit in k dimensions at overlap 0
(the cross-polytope ``±e_i``) and 5 fit in 2 (a pentagon, overlap cos 72° ≈ 0.31). Two-sided codes
bound ``|<w_i, w_j>|`` (needed where a value is copied, not thresholded).
"""

from __future__ import annotations

import numpy as np

from compiler.errors import CompressionError
from craft.numerics import softmax


def code_overlap(code: np.ndarray, one_sided: bool) -> float:
    """Largest ``<w_i, w_j>`` (``one_sided``) or ``|<w_i, w_j>|`` over ``i != j``; -inf for n < 2."""
    n = code.shape[0]
    if n < 2:
        return float("-inf")
    gram = code.astype(np.float64) @ code.T.astype(np.float64)
    np.fill_diagonal(gram, -np.inf)
    return float(gram.max() if one_sided else np.abs(np.where(np.isinf(gram), 0.0, gram)).max())


def exclusive_code(n: int, k: int, one_sided: bool, seed: int = 0, iterations: int = 400,
                   stop_at: float | None = None) -> np.ndarray:
    """``(n, k)`` unit rows with a small largest overlap (see :func:`code_overlap`).

    Exact constructions where they are optimal (``n <= k``: the identity; one-sided ``n <= 2k``:
    ``±e_i``), else a seeded projected-gradient descent on a soft maximum of the overlaps. With
    ``stop_at``, the descent stops as soon as the overlap is at most ``stop_at`` (enough to know
    that k dimensions suffice; the full descent gives a smaller overlap).
    """
    if n < 1 or k < 1:
        raise CompressionError(f"need n >= 1 values and k >= 1 dimensions, got n={n}, k={k}")
    if n <= k:
        return np.eye(n, k)
    if one_sided and n <= 2 * k:
        eye = np.eye(k)
        return np.concatenate([eye, -eye])[:n]
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((n, k))
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    best, best_value = w.copy(), code_overlap(w, one_sided)
    mask = ~np.eye(n, dtype=bool)
    for step in range(iterations):
        gram = w @ w.T
        target = gram if one_sided else np.abs(gram)
        beta = 10.0 + 90.0 * step / iterations  # soft max sharpens as it converges
        weights = softmax((beta * target).ravel(), where=mask.ravel()).reshape(n, n)  # over all pairs
        signed = weights if one_sided else weights * np.sign(gram)
        grad = (signed + signed.T) @ w
        w = w - 0.05 * grad / (np.abs(grad).max() + 1e-12)
        w /= np.linalg.norm(w, axis=1, keepdims=True)
        value = code_overlap(w, one_sided)
        if value < best_value:
            best, best_value = w.copy(), value
        if stop_at is not None and best_value <= stop_at:
            break
    return best


def welch_bound(n: int, k: int) -> float:
    """The smallest largest ``|<w_i, w_j>|`` any ``n`` unit vectors in ``k < n`` dimensions can
    have (Welch's bound, ``sqrt((n - k) / (k (n - 1)))``): a two-sided code needs at least as much."""
    return float(np.sqrt((n - k) / (k * (n - 1))))


def smallest_code(n: int, limit: float, one_sided: bool, seed: int = 0) -> np.ndarray:
    """The code of n values in the fewest dimensions whose largest overlap is at most ``limit``.

    The width is found by doubling k until a code fits, then bisecting between the last width that
    did not fit and the first that did (a probe stops its descent once it fits); about
    ``2 log2 k`` probes instead of k, which matters for hundreds of values (512 values need about 15
    dimensions). This assumes that fitting is monotone in k, which the seeded descent gives in
    practice. The returned code is the full descent at that width. Falls back to the identity (or
    ``±e_i``, overlap 0) when no smaller code is found.
    """
    upper = n if not one_sided else max(1, -(-n // 2))

    def fits(k: int) -> bool:
        if not one_sided and k < n and welch_bound(n, k) > limit:
            return False  # no code of n unit vectors in k dimensions has a smaller largest |overlap|
        return code_overlap(exclusive_code(n, k, one_sided, seed, stop_at=limit), one_sided) <= limit

    low, high, k = 0, upper, 1  # every width <= low fails to fit; high fits (or is the fallback)
    while k < upper:
        if fits(k):
            high = k
            break
        low, k = k, 2 * k
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if fits(middle) else (middle, high)
    return exclusive_code(n, high, one_sided, seed)
