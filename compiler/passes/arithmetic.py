"""Python's own arithmetic, vectorised, for value inference: results of the evaluator's types.

The evaluator computes a `LinearSequenceMap` as `fst_fac * x + snd_fac * y` and a
`SumAggregate` as `sum(selected)` in plain Python, so their results are ints where every operand
is an int (or a bool) and floats as soon as one operand is a float. Value inference enumerates
these results with numpy over whole value sets; the helpers here split the operands by type and
compute each group with the dtype Python's arithmetic gives it (int64 for ints, float64 for
floats, the same IEEE operations in the same order), so every value comes back as the Python
int or float the evaluator produces. They decline (None) where that cannot be guaranteed: an
operand that is no plain int, bool or float (a numpy scalar, a Fraction), or ints too large to
compute exactly in int64 / float64; the caller then calls the function itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

# Largest magnitude of an int operand or result computed in numpy: exact in int64 and float64.
EXACT_LIMIT = 2**52

Block = tuple[type, list]  # values of one Python type


def split_by_type(values: Iterable[Any]) -> tuple[list[int], list[float]] | None:
    """`(ints, floats)`: plain ints and bools, and plain floats; None for any other type."""
    ints: list[int] = []
    floats: list[float] = []
    for value in values:
        kind = type(value)
        if kind is int or kind is bool:
            ints.append(value)
        elif kind is float:
            floats.append(value)
        else:
            return None
    return ints, floats


def _plain(factor: Any) -> bool:
    return type(factor) in (int, bool, float)


def _magnitude(values: list) -> int | float:
    return max((abs(v) for v in values), default=0)


def linear_values(fst_fac: Any, snd_fac: Any, xs: Iterable[Any], ys: Iterable[Any], diagonal: bool) -> list[Block] | None:
    """Every `fst_fac * x + snd_fac * y` over `xs` x `ys` (over `x == y` when `diagonal`), as
    blocks of one Python type each, or None when they cannot be computed exactly here."""
    if not (_plain(fst_fac) and _plain(snd_fac)):
        return None
    x_split = split_by_type(xs)
    y_split = x_split if diagonal else split_by_type(ys)
    if x_split is None or y_split is None:
        return None
    bound = abs(fst_fac) * _magnitude(x_split[0]) + abs(snd_fac) * _magnitude(y_split[0])
    if bound >= EXACT_LIMIT or max(_magnitude(x_split[0]), _magnitude(y_split[0])) >= EXACT_LIMIT:
        return None
    integer_factors = type(fst_fac) is not float and type(snd_fac) is not float
    blocks: list[Block] = []
    groups = ((x_split[0], True), (x_split[1], False))
    for x_group, x_int in groups:
        if not x_group:
            continue
        if diagonal:
            pairs = [(x_group, x_int)]
        else:
            pairs = [(y_group, y_int) for y_group, y_int in ((y_split[0], True), (y_split[1], False)) if y_group]
        for y_group, y_int in pairs:
            kind: type[int] | type[float]
            dtype: type[np.int64] | type[np.float64]
            if integer_factors and x_int and y_int:
                kind, dtype, fst, snd = int, np.int64, int(fst_fac), int(snd_fac)
            else:
                kind, dtype, fst, snd = float, np.float64, fst_fac, snd_fac
            x = np.array(x_group, dtype=dtype)
            if diagonal:
                found = fst * x + snd * x
            else:
                y = np.array(y_group, dtype=dtype)
                found = (fst * x[:, None] + snd * y[None, :]).ravel()
            blocks.append((kind, np.unique(found).tolist()))
    return blocks
