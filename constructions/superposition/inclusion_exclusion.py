"""All fan-ins from one bias -1 U-AND by inclusion-exclusion (docs/superposition.md, 'U-AND').

The AND of a set ``I`` is read along ``sum_{I' subset I, |I'| >= 2} a_{I'} v_{I'}`` where
``v_{I'}`` is the normalised indicator of the neurons wired to every member of ``I'``. Idealised,
``v_{I'}`` reads ``max(0, |I' & J| - 1)`` on an input whose active part of ``I`` is ``J``; Möbius
inversion of that identity gives ``a_{I'} = (-1)^{|I'|}`` (the source's sign is wrong for even
``|I|``). Calibrated coefficients instead invert the *expected* finite-density
reads, which also count neurons wired to active gate members outside ``I'``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from constructions.superposition.metrics import StatusReport, split_by_status
from constructions.superposition.seeding import Seed, as_generator
from constructions.superposition.uand import UAnd, gate_indicator


@dataclass(frozen=True)
class IECoefficients:
    """Coefficient ``a`` per sub-gate size (index 0 = size 2) for gates of size ``k``."""

    k: int
    by_size: tuple[float, ...]
    density: float | None  # None: the exact Möbius signs (-1)^{|I'|}

    def of(self, size: int) -> float:
        return self.by_size[size - 2]


def _subsets(k: int, min_size: int = 2) -> list[tuple[int, ...]]:
    return [c for r in range(min_size, k + 1) for c in itertools.combinations(range(k), r)]


def mobius_coefficients(k: int) -> IECoefficients:
    """``a_{I'} = (-1)^{|I'|}``: exact on idealised reads."""
    return IECoefficients(k, tuple(float((-1) ** r) for r in range(2, k + 1)), None)


def expected_read(n_in: int, n_out: int, density: float) -> float:
    """``E[max(0, n_in - 1 + Bin(n_out, p))]``: a sub-gate's read with ``n_in`` of its members on
    and ``n_out`` active gate members outside it."""
    b = np.arange(n_out + 1)
    pmf = np.array([math.comb(n_out, x) for x in b]) * density**b * (1 - density) ** (n_out - b)
    return float(np.sum(pmf * np.maximum(0, n_in - 1 + b)))


def calibrated_coefficients(k: int, density: float) -> IECoefficients:
    """Solve ``sum_{I'} a_{I'} h_{I'}(S) = [S = I]`` over all ``S subset I`` with ``|S| >= 2``.

    ``h_{I'}(S)`` is :func:`expected_read` with ``|I' & S|`` members in and ``|S - I'|`` out.
    The solution is symmetric, so it is returned per sub-gate size.
    """
    subs = _subsets(k)
    h = np.array([[expected_read(len(set(t) & set(s)), len(set(s) - set(t)), density)
                   for t in subs] for s in subs])
    rhs = np.array([1.0 if len(s) == k else 0.0 for s in subs])
    a = np.linalg.solve(h, rhs)
    by_size = []
    for r in range(2, k + 1):
        vals = a[[i for i, t in enumerate(subs) if len(t) == r]]
        if np.ptp(vals) > 1e-9:
            raise ArithmeticError("calibrated system lost its symmetry")
        by_size.append(float(vals[0]))
    return IECoefficients(k, tuple(by_size), density)


def idealised_read(k: int, coefficients: IECoefficients, active: Sequence[int]) -> float:
    """``sum a_{I'} max(0, |I' & J| - 1)``: what the read gives with perfectly clean sub-gates."""
    on = set(active)
    return float(sum(coefficients.of(len(t)) * max(0, len(on & set(t)) - 1) for t in _subsets(k)))


@dataclass(frozen=True, eq=False)
class IERead:
    """Inclusion-exclusion readouts of higher fan-in gates on a pairwise U-AND layer."""

    uand: UAnd
    gates: np.ndarray  # (G, k)
    coefficients: IECoefficients
    readout: np.ndarray  # (d, G)
    min_subgate_size: int | None  # smallest sub-gate intersection; None if no sub-gates (k < 2)
    name: str = "ie"

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.uand.hidden(x) @ self.readout

    @cached_property
    def mlp(self):
        """The U-AND layer with these reads as its second map (a Craft ``MLP``)."""
        from constructions.superposition.craft_blocks import boolean_mlp

        labels = self.uand.inputs.labels
        return boolean_mlp(self.uand.inputs, self.uand.w_in, self.uand.bias, self.readout,
                           [tuple(labels[i] for i in g) for g in self.gates], name=self.name)


def build_ie_read(uand: UAnd, gates: np.ndarray, coefficients: IECoefficients,
                  name: str = "ie") -> IERead:
    """Readout matrix ``(d, G)`` of the inclusion-exclusion reads for ``gates`` (``(G, k)``)."""
    if uand.meta.fan_in != 2:
        raise ValueError("inclusion-exclusion reads need a pairwise (bias -1) U-AND")
    gates = np.asarray(gates, dtype=np.int64)
    k = gates.shape[1]
    if coefficients.k != k:
        raise ValueError(f"coefficients are for size {coefficients.k}, gates have size {k}")
    readout = np.zeros((uand.wiring.shape[1], len(gates)), dtype=np.float32)
    min_size: int | None = None
    for sub in _subsets(k):
        ind = gate_indicator(uand.wiring, gates[:, list(sub)])
        sizes = ind.sum(axis=1)
        if (sizes == 0).any():
            raise ValueError(f"a sub-gate of size {len(sub)} has an empty intersection; "
                             "raise the density or width")
        min_size = int(sizes.min()) if min_size is None else min(min_size, int(sizes.min()))
        readout += coefficients.of(len(sub)) * (ind / sizes[:, None]).T.astype(np.float32)
    return IERead(uand, gates, coefficients, readout, min_size, name)


def measure_ie(read: IERead, distractors: int, seed: Seed) -> StatusReport:
    """Errors over every sub-pattern ``S subset I`` of every gate, plus ``distractors`` random
    active features outside the gate; target ``[S = I]``, status ``|S|``."""
    rng = as_generator(seed)
    g, k = read.gates.shape
    m = read.uand.meta.n_features
    patterns = [c for r in range(k + 1) for c in itertools.combinations(range(k), r)]
    rows, owner, sizes = [], [], []
    for gi, gate in enumerate(read.gates):
        for pat in patterns:
            x = np.zeros(m, dtype=bool)
            x[gate[list(pat)]] = True
            if distractors:
                pool = np.setdiff1d(np.arange(m), gate)
                x[rng.choice(pool, size=distractors, replace=False)] = True
            rows.append(x)
            owner.append(gi)
            sizes.append(len(pat))
    xb = np.array(rows)
    phys = xb.astype(np.float32) @ read.uand.inputs.write
    y = read(phys)[np.arange(len(owner)), owner]
    status = np.array(sizes)
    return split_by_status(y, (status == k).astype(np.float32), status)

