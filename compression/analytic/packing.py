"""Analytic residual projections: compile a model into superposition without training.

Two constructions of ``W`` (D x d) from a model's :class:`~compression.analytic.structure.ResidualStructure`
(docs/compression.md, "Analytic projections"); :mod:`compression.analytic.bound` says whether the
compressed model is exact:

* :func:`random_projection`: protected coordinates on their own axes, every other categorical
  coordinate on a random unit direction in the remaining ``d - p`` dimensions.
* :func:`packed_projection`: protected axes as above; coordinates nothing reads get the zero
  column; each categorical s-op gets its own block holding an exclusive-value code
  (:mod:`compression.analytic.codes`) whose overlap its readers tolerate.

"""

from __future__ import annotations

import dataclasses
import functools
from typing import Literal

import numpy as np

from compiler.errors import CompressionError
from compression.analytic.bound import InterferenceBound
from compression.analytic.codes import exclusive_code, smallest_code
from compression.analytic.structure import ResidualStructure
from constructions.superposition.features import random_unit_features

Method = Literal["random", "packed"]

# A code for a reader of margin weight A targets overlap SAFETY / A (the exact limit is 1 / A).
SAFETY = 0.9
# Two-sided overlap targeted for s-ops whose values an attention head copies.
COPY_OVERLAP = 0.2


@dataclasses.dataclass(frozen=True)
class AnalyticReport:
    """What an analytic projection promises and what it achieved."""

    method: str
    residual_dim: int
    d: int
    protected: int  # coordinates on their own axes
    bound: InterferenceBound
    claimed_exact: bool
    measured_exact: bool | None = None  # every evaluated input equals RASP (None: not measured)
    sequence_accuracy: float | None = None
    inputs_checked: int = 0
    inputs_enumerated: bool = False


def _check_width(structure: ResidualStructure, d: int) -> int:
    p = len(structure.protected)
    if d < p:
        raise CompressionError(f"d={d} is below the {p} protected coordinates of this model (numerical s-ops, one, BOS, "
                         f"attention query/key reads); choose d >= {p}")
    return p


def random_projection(structure: ResidualStructure, d: int, seed: int = 0) -> np.ndarray:
    """Protected coordinates on axes ``0..p-1``; every other categorical coordinate on a random unit
    vector in the last ``d - p`` dimensions (``constructions.superposition.features.random_unit_features``)."""
    p = _check_width(structure, d)
    w = np.zeros((structure.residual_dim, d), np.float64)
    w[list(structure.protected), np.arange(p)] = 1.0
    rest = [i for g in structure.groups for i in g if i not in set(structure.protected)]
    if rest:
        if d == p:
            raise CompressionError(f"d={d} leaves no dimension for the {len(rest)} categorical coordinates; use d > {p}")
        features = random_unit_features("residual", len(rest), d - p, seed)
        w[rest, p:] = features.write
    return w.astype(np.float32)


@dataclasses.dataclass(frozen=True)
class GroupNeed:
    """One s-op's free coordinates, grouped into the values its code must tell apart (a class of
    alike values shares one code vector), and the overlap its readers tolerate."""

    values: tuple[tuple[int, ...], ...]
    limit: float
    one_sided: bool

    @property
    def coords(self) -> tuple[int, ...]:
        return tuple(i for value in self.values for i in value)


def group_needs(structure: ResidualStructure) -> list[GroupNeed]:
    """Per categorical s-op with free coordinates: the overlap its code may have."""
    group_of = structure.group_of()
    free = set(structure.free)
    limits: dict[int, float] = {}
    one_sided: dict[int, bool] = {}
    for read in structure.reads:
        weight = read.weight if read.kind == "lookup" else 2.0
        for i in read.coords:
            g = group_of[i]
            limits[g] = min(limits.get(g, 1.0), SAFETY / weight)
            if read.kind == "copy":  # the reads of up to `fan-in` values add up in one written value
                limits[g] = min(limits[g], COPY_OVERLAP / max(read.weight, 1.0))
                one_sided[g] = False
            if read.sums_values:  # a unit adding several values' reads: negative overlaps count too
                one_sided[g] = False
            one_sided.setdefault(g, True)
    class_of = structure.class_of()
    needs = []
    for g, coords in enumerate(structure.groups):
        values: dict[int, list[int]] = {}
        for i in coords:
            if i in free:
                values.setdefault(class_of[i], []).append(i)
        if values:
            needs.append(GroupNeed(tuple(tuple(v) for v in values.values()), limits.get(g, SAFETY / 2),
                                   one_sided.get(g, True)))
    return needs


def packed_width(structure: ResidualStructure, seed: int = 0) -> int:
    """The d at which :func:`packed_projection` gives every s-op its full-margin code."""
    needs = group_needs(structure)
    return len(structure.protected) + sum(_code(len(n.values), n.limit, n.one_sided, seed).shape[1] for n in needs)


def packed_projection(structure: ResidualStructure, d: int, seed: int = 0) -> np.ndarray:
    """Protected axes, zero columns for unread coordinates, and one code block per s-op.

    Each s-op gets the fewest dimensions whose code meets its readers' overlap limit; when ``d``
    is too small for all of them, the widest blocks are narrowed one dimension at a time (codes
    with a larger overlap, which the bound then judges). (Narrowing instead the block whose
    narrowing keeps the bound's largest load smallest was tried: it follows the conservative bound
    and is measured exact 1-3 dimensions later on reverse, sort, shift_by_1 and detect_abc.)
    """
    p = _check_width(structure, d)
    needs = group_needs(structure)
    widths = [_code(len(n.values), n.limit, n.one_sided, seed).shape[1] for n in needs]
    budget = d - p
    if needs and budget < len(needs):
        raise CompressionError(f"d={d} leaves {budget} dimensions for {len(needs)} categorical s-ops; "
                         f"the packed projection needs d >= {p + len(needs)}")
    while sum(widths) > budget:
        widths[int(np.argmax(widths))] -= 1
    w = np.zeros((structure.residual_dim, d), np.float64)
    w[list(structure.protected), np.arange(p)] = 1.0
    column = p
    for need, width in zip(needs, widths):
        code = _code(len(need.values), need.limit, need.one_sided, seed)
        if width != code.shape[1]:
            code = _code(len(need.values), need.limit, need.one_sided, seed, width)
        for value, vector in zip(need.values, code):
            w[list(value), column:column + width] = vector
        column += width
    return w.astype(np.float32)


@functools.lru_cache(maxsize=512)
def _code(n: int, limit: float, one_sided: bool, seed: int, k: int | None = None) -> np.ndarray:
    """The full-margin code (``k`` None) or the best code in ``k`` dimensions; cached (the width
    searches rebuild the same codes at every d), read-only."""
    code = smallest_code(n, limit, one_sided, seed) if k is None else exclusive_code(n, k, one_sided, seed)
    code.setflags(write=False)
    return code


def make_projection(structure: ResidualStructure, method: Method, d: int, seed: int = 0) -> np.ndarray:
    """The ``method`` projection at width ``d``."""
    if method == "random":
        return random_projection(structure, d, seed)
    if method == "packed":
        return packed_projection(structure, d, seed)
    raise CompressionError(f"unknown analytic method {method!r}; use 'random' or 'packed'")


def min_width(structure: ResidualStructure, method: Method) -> int:
    """The smallest d the construction accepts."""
    p = len(structure.protected)
    if method == "packed":
        return p + len(group_needs(structure))
    has_rest = any(i not in set(structure.protected) for g in structure.groups for i in g)
    return p + (1 if has_rest else 0)

