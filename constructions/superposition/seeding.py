"""Turn the explicit seed every builder takes into a numpy Generator.

Builders accept either an ``int`` (recorded in their metadata, so a run can be repeated) or an
already-constructed ``numpy.random.Generator`` (for callers that thread one stream through
several builders; the metadata then records ``None``).
"""

from __future__ import annotations

import numpy as np

Seed = int | np.random.Generator


def as_generator(seed: Seed) -> np.random.Generator:
    """Return a Generator for ``seed``; ints go through ``numpy.random.default_rng``."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        return np.random.default_rng(int(seed))
    raise TypeError(f"seed must be an int or numpy.random.Generator, got {type(seed).__name__}")


def recorded_seed(seed: Seed) -> int | None:
    """The value stored in metadata: the int seed, or None for a caller-owned Generator."""
    return None if isinstance(seed, np.random.Generator) else int(seed)


def sample_distinct(rng: np.random.Generator, n_rows: int, size: int, population: int) -> np.ndarray:
    """``(n_rows, size)`` ints, each row ``size`` distinct values from ``range(population)``.

    Vectorised: draw with replacement, then redraw only the rows that contain a repeat. For
    ``size << population`` a handful of rounds suffice.
    """
    if size > population:
        raise ValueError(f"cannot draw {size} distinct values from {population}")
    out = rng.integers(0, population, size=(n_rows, size))
    while True:
        srt = np.sort(out, axis=1)
        bad = np.flatnonzero((srt[:, 1:] == srt[:, :-1]).any(axis=1))
        if bad.size == 0:
            return out
        if size * 2 > population:
            out[bad] = np.stack([rng.permutation(population)[:size] for _ in bad])
        else:
            out[bad] = rng.integers(0, population, size=(bad.size, size))
