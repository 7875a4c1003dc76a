"""Residual-stream helpers for chamber tests: build per-position vectors by direction label."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from craft.bases import BasisDirection, VectorInBasis, VectorSpaceWithBasis, join_vector_spaces

ONE = BasisDirection("one")
BOS = BasisDirection("tokens", "BOS")
ONE_SPACE = VectorSpaceWithBasis((ONE,))
BOS_SPACE = VectorSpaceWithBasis((BOS,))


def stream(space: VectorSpaceWithBasis, rows: Sequence[Mapping[BasisDirection, float]], bos: bool = True) -> VectorInBasis:
    """Sequence vector over `space` (+ one, BOS): optional BOS row first, then one row per mapping.

    Every non-BOS row gets `one` = 1; the BOS row holds only `one` and BOS.
    """
    full = join_vector_spaces(space, ONE_SPACE, BOS_SPACE)
    mags = np.zeros((len(rows) + bos, full.num_dims))
    if bos:
        mags[0, full.index(ONE)] = 1.0
        mags[0, full.index(BOS)] = 1.0
    for i, row in enumerate(rows):
        mags[i + bos, full.index(ONE)] = 1.0
        for direction, value in row.items():
            mags[i + bos, full.index(direction)] += value
    return VectorInBasis(full.basis, mags)


def decode_categorical(vector: VectorInBasis, name: str, tol: float = 1e-6) -> list:
    """Per position: the value whose direction is ~1 (others ~0), None when all ~0; raises otherwise."""
    dirs = [(i, d) for i, d in enumerate(vector.basis_directions) if d.name == name and d.value is not None]
    out = []
    for row in vector.magnitudes.reshape(-1, vector.shape[-1]):
        vals = np.array([row[i] for i, _ in dirs])
        on = np.nonzero(np.abs(vals - 1) < tol)[0]
        off = np.abs(vals) < tol
        if len(on) == 0 and off.all():
            out.append(None)
        elif len(on) == 1 and off.sum() == len(dirs) - 1:
            out.append(dirs[on[0]][1].value)
        else:
            raise AssertionError(f"not a one-hot: {dict((str(d), v) for (_, d), v in zip(dirs, vals) if abs(v) > tol)}")
    return out
