"""Universal AND with a quadratic activation (docs/superposition.md, 'Quadratic universal AND').

A width-``r^2`` layer with ``square`` activation whose first map has the columns ``e_i``
(``r`` of them) and ``e_i + e_j``, ``e_i - e_j`` for ``i < j`` computes every quadratic form of
an ``r``-dimensional input exactly, since ``x_i x_j = ((x_i + x_j)^2 - (x_i - x_j)^2) / 4``. The
AND of features ``f_i``, ``f_j`` (unit vectors in ``R^r``) is read as ``(f_i . x)(f_j . x)``;
with coherence ``mu`` its error on ``s``-sparse inputs is at most ``2 s mu + (s mu)^2``, and the
number of features can be exponential in ``r``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from constructions.superposition.features import FeatureSpace, boolean_matrix
from constructions.superposition.metrics import StatusReport, split_by_status
from constructions.superposition.seeding import Seed, as_generator, sample_distinct


def universal_lift(r: int, dtype=np.float64) -> np.ndarray:
    """``(r, r^2)`` first-layer matrix: ``e_i``, then ``e_i + e_j`` and ``e_i - e_j`` (i < j)."""
    iu, ju = np.triu_indices(r, k=1)
    n_pairs = len(iu)
    plus = np.zeros((r, n_pairs), dtype=dtype)
    minus = np.zeros((r, n_pairs), dtype=dtype)
    cols = np.arange(n_pairs)
    plus[iu, cols] = 1.0
    plus[ju, cols] = 1.0
    minus[iu, cols] = 1.0
    minus[ju, cols] = -1.0
    return np.concatenate([np.eye(r, dtype=dtype), plus, minus], axis=1)


def quadratic_readout(forms: np.ndarray) -> np.ndarray:
    """``(r^2, G)`` readout computing ``x^T A_g x`` from the lifted squares, for ``forms`` ``(G, r, r)``."""
    forms = np.asarray(forms)
    r = forms.shape[-1]
    iu, ju = np.triu_indices(r, k=1)
    diag = np.diagonal(forms, axis1=1, axis2=2)  # (G, r)
    sym = (forms[:, iu, ju] + forms[:, ju, iu]) / 4.0  # (G, P)
    return np.concatenate([diag, sym, -sym], axis=1).T


def and_forms(features: np.ndarray, gates: np.ndarray, normalise: bool = False) -> np.ndarray:
    """Quadratic forms ``f_i f_j^T`` of pair gates; ``normalise`` divides by ``(1 + f_i.f_j)^2``
    so the two-hot both-on reading is exact."""
    fi, fj = features[gates[:, 0]], features[gates[:, 1]]
    forms = fi[:, :, None] * fj[:, None, :]
    if normalise:
        forms = forms / ((1.0 + np.sum(fi * fj, axis=1)) ** 2)[:, None, None]
    return forms


@dataclass(frozen=True)
class QuadraticMeta:
    """Sizes and coherence of a quadratic U-AND."""

    r: int
    n_neurons: int
    n_features: int
    n_gates: int
    coherence_max: float  # mu
    coherence_rms: float
    normalised: bool

    def error_bound(self, active: int) -> float:
        """Deterministic bound ``2 s mu + (s mu)^2`` on every reading's error."""
        smu = active * self.coherence_max
        return 2 * smu + smu**2


@dataclass(frozen=True, eq=False)
class QuadraticUAnd:
    """Square-activation layer with pair-AND readouts over features in ``R^r``."""

    inputs: FeatureSpace
    lift: np.ndarray  # (r, r^2)
    readout: np.ndarray  # (r^2, G)
    gates: np.ndarray  # (G, 2)
    meta: QuadraticMeta
    name: str = "quad"

    def hidden(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x, dtype=self.lift.dtype) @ self.lift) ** 2

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.hidden(x) @ self.readout

    @cached_property
    def mlp(self):
        """This layer as a Craft ``MLP`` with ``square`` activation."""
        from constructions.superposition.craft_blocks import boolean_mlp

        labels = self.inputs.labels
        return boolean_mlp(self.inputs, self.lift, np.zeros(self.lift.shape[1]), self.readout,
                           [(labels[i], labels[j]) for i, j in self.gates], name=self.name,
                           activation="square")


def build_quadratic_uand(features: FeatureSpace, gates: np.ndarray, *, normalise: bool = False,
                         name: str = "quad") -> QuadraticUAnd:
    """Quadratic U-AND reading the pair ``gates`` (``(G, 2)``) of ``features`` (dims = ``r``)."""
    gates = np.asarray(gates, dtype=np.int64)
    f = features.read.astype(np.float64)
    r = features.n_dims
    coh = features.coherence()
    meta = QuadraticMeta(r, r * r, features.n_features, len(gates), coh.max_abs, coh.rms, normalise)
    readout = quadratic_readout(and_forms(f, gates, normalise))
    return QuadraticUAnd(features, universal_lift(r), readout, gates, meta, name)


@dataclass(frozen=True)
class QuadraticReport:
    """Errors of the quadratic AND plus the count of readings over the deterministic bound."""

    errors: StatusReport
    bound: float
    violations: int


def measure_quadratic(layer: QuadraticUAnd, n_inputs: int, active: int, seed: Seed) -> QuadraticReport:
    """Section 6.3 protocol: every input is read on *all* gates of the layer.

    Each input is built around one random gate: half the inputs contain it (plus ``active - 2``
    random features), half are ``active`` random features not containing both of its inputs.
    Errors are split by how many of each gate's inputs are on.
    """
    rng = as_generator(seed)
    m = layer.meta.n_features
    pairs = layer.gates[rng.integers(0, layer.meta.n_gates, n_inputs)]
    sets = sample_distinct(rng, n_inputs, active, m)
    half = n_inputs // 2
    for row in range(n_inputs):
        if row < half:
            rest = [v for v in sets[row] if v not in pairs[row]][: active - 2]
            sets[row] = np.concatenate([pairs[row], rest])
        else:
            while set(pairs[row]) <= set(sets[row]):
                sets[row] = sample_distinct(rng, 1, active, m)[0]
    x = boolean_matrix(sets, m)
    y = layer(x.astype(np.float64) @ layer.inputs.write)
    status = x[:, layer.gates].sum(axis=-1)
    target = (status == 2).astype(np.float64)
    bound = layer.meta.error_bound(active)
    violations = int(np.sum(np.abs(y - target) > bound + 1e-9))
    return QuadraticReport(split_by_status(y, target, status, {2: "both", 1: "one", 0: "none"}),
                           bound, violations)
