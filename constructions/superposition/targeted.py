"""Targeted superposed AND on a chosen gate set (docs/superposition.md, 'Targeted and mixed fan-in AND').

Instead of reading every pair off random intersections, each gate ``g`` gets its own random set
``T_g`` of ``t`` neurons; every input feature is wired to the union of the sets of the gates it
belongs to, and gate ``g`` is read as the average over ``T_g``. Mixed fan-in uses weight ``K/k``
for a fan-in-``k`` gate (``K`` = largest fan-in) and bias ``-K + 1`` on every neuron, so a gate
with all inputs on has preactivation exactly 1 on its unshared neurons and one input short has
``1 - K/k <= 0``. Capacity is about one gate per parameter ``d0 * d`` (interference
``sigma = sqrt(s * sum_i w_i^2 / d0)`` per neuron stays below 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from constructions.superposition.features import FeatureSpace, basis_features
from constructions.superposition.metrics import StatusReport, split_by_status
from constructions.superposition.readout import SparseReadout, from_sets
from constructions.superposition.seeding import Seed, as_generator, recorded_seed, sample_distinct


@dataclass(frozen=True)
class TargetedMeta:
    """Build parameters and build-time facts of a targeted U-AND layer."""

    n_features: int
    n_inputs: int
    n_neurons: int
    set_size: int
    n_gates: int
    max_fan_in: int
    bias: float
    seed: int | None
    mean_neuron_fan_in: float  # input features wired per neuron (paper: 2|E|t/d for pairs)
    max_neuron_fan_in: int
    active: int  # sparsity the prediction is stated for
    predicted_sigma: float  # superposition noise on a neuron's preactivation (0 when aligned)
    shared_neurons: int  # neurons in the sets of two or more gates


@dataclass(frozen=True, eq=False)
class TargetedUAnd:
    """Weights, gates (padded with -1 to the largest fan-in) and neuron sets of the layer."""

    inputs: FeatureSpace
    wiring: np.ndarray  # (m, d) float32 weights K/k (0 where unwired)
    w_in: np.ndarray  # (d0, d)
    bias: np.ndarray  # (d,)
    gates: np.ndarray  # (G, K) feature indices, -1 padded
    fan_ins: np.ndarray  # (G,)
    sets: np.ndarray  # (G, t) neuron indices
    meta: TargetedMeta
    name: str = "targeted"

    def hidden(self, x: np.ndarray) -> np.ndarray:
        return np.maximum(np.asarray(x, dtype=self.w_in.dtype) @ self.w_in + self.bias, 0.0)

    @cached_property
    def readout(self) -> SparseReadout:
        return from_sets(self.sets, self.w_in.shape[1])

    def read(self, hidden: np.ndarray) -> np.ndarray:
        return self.readout.apply(hidden)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.read(self.hidden(x))

    def gate_labels(self) -> list[tuple]:
        labels = self.inputs.labels
        return [tuple(labels[i] for i in g if i >= 0) for g in self.gates]

    @cached_property
    def mlp(self):
        """This layer as a Craft ``MLP``."""
        from constructions.superposition.craft_blocks import boolean_mlp

        return boolean_mlp(self.inputs, self.w_in, self.bias, self.readout.dense,
                           self.gate_labels(), name=self.name)

    def output_mlp(self, outputs: FeatureSpace, name: str | None = None):
        """Craft ``MLP`` writing gate ``g`` along ``outputs.write[g]`` (for stacking, section 7)."""
        from constructions.superposition.craft_blocks import boolean_mlp

        return boolean_mlp(self.inputs, self.w_in, self.bias, self.readout.dense,
                           self.gate_labels(), name=name or self.name, outputs=outputs)


def random_pair_gates(n_features: int, n_gates: int, seed: Seed) -> np.ndarray:
    """``n_gates`` distinct unordered pairs of distinct features, ``(G, 2)`` sorted rows."""
    if n_gates > n_features * (n_features - 1) // 2:
        raise ValueError("more gates requested than pairs exist")
    rng = as_generator(seed)
    found = np.empty((0, 2), dtype=np.int64)
    while len(found) < n_gates:
        draw = np.sort(sample_distinct(rng, 2 * (n_gates - len(found)) + 16, 2, n_features), axis=1)
        found = np.unique(np.concatenate([found, draw]), axis=0)
    return found[rng.permutation(len(found))[:n_gates]]


def _pad_gates(gates: Sequence[Sequence[int]] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(gates, np.ndarray) and gates.ndim == 2:
        return gates.astype(np.int64), np.full(len(gates), gates.shape[1])
    fan = np.array([len(g) for g in gates])
    out = np.full((len(gates), int(fan.max())), -1, dtype=np.int64)
    for i, g in enumerate(gates):
        out[i, :len(g)] = g
    return out, fan


def build_targeted_uand(inputs: int | FeatureSpace, gates: Sequence[Sequence[int]] | np.ndarray,
                        n_neurons: int, set_size: int, seed: Seed, *, active: int = 2,
                        name: str = "targeted") -> TargetedUAnd:
    """Build a targeted (mixed fan-in) U-AND layer.

    Args:
      inputs: ``d0`` basis-aligned inputs or a :class:`FeatureSpace` (superposed inputs).
      gates: per gate, the feature indices it ANDs (fan-in may vary).
      n_neurons: width ``d``.
      set_size: ``t``, neurons per gate (paper: ``log(d0)^4``; 8 works at finite size).
      seed: int or numpy Generator.
      active: sparsity ``s`` used for the predicted noise in the metadata.
    """
    features = basis_features(f"{name}_in", range(inputs)) if isinstance(inputs, int) else inputs
    m = features.n_features
    padded, fan = _pad_gates(gates)
    if (fan < 2).any():
        raise ValueError("every gate needs at least two inputs")
    if padded.max() >= m:
        raise ValueError(f"gate input index {int(padded.max())} out of range for {m} features")
    big_k = int(fan.max())
    rng = as_generator(seed)
    sets = sample_distinct(rng, len(padded), set_size, n_neurons)
    wiring = np.zeros((m, n_neurons), dtype=np.float32)
    weight = (big_k / fan).astype(np.float32)
    for j in range(big_k):
        rows = np.flatnonzero(padded[:, j] >= 0)
        feat = np.repeat(padded[rows, j], set_size)
        neur = sets[rows].ravel()
        np.maximum.at(wiring, (feat, neur), np.repeat(weight[rows], set_size))
    w_in = wiring if features.basis_aligned else features.write.T.astype(np.float32) @ wiring
    bias = np.full(n_neurons, -(big_k - 1), dtype=np.float32)
    per_neuron = (wiring > 0).sum(axis=0)
    use = np.bincount(sets.ravel(), minlength=n_neurons)
    sigma = 0.0 if features.basis_aligned else math.sqrt(
        active * float(np.mean((wiring**2).sum(axis=0))) / features.n_dims)
    meta = TargetedMeta(
        n_features=m, n_inputs=features.n_dims, n_neurons=n_neurons, set_size=set_size,
        n_gates=len(padded), max_fan_in=big_k, bias=float(-(big_k - 1)), seed=recorded_seed(seed),
        mean_neuron_fan_in=float(per_neuron.mean()), max_neuron_fan_in=int(per_neuron.max()),
        active=active, predicted_sigma=sigma, shared_neurons=int((use >= 2).sum()))
    return TargetedUAnd(features, wiring, w_in, bias, padded, fan, sets, meta, name)


def gate_inputs(layer: TargetedUAnd, n: int, active: int, seed: Seed, *, near: bool = False
                ) -> tuple[np.ndarray, np.ndarray]:
    """``n`` inputs, each switching one random gate on (or, ``near``, on but for one input),
    topped up with random distractors to ``active`` features. Returns ``(boolean (n, m), gate)``."""
    rng = as_generator(seed)
    m = layer.meta.n_features
    chosen = rng.integers(0, layer.meta.n_gates, n)
    x = np.zeros((n, m), dtype=bool)
    for row, g in enumerate(chosen):
        members = layer.gates[g, :layer.fan_ins[g]]
        if near:
            members = np.delete(members, rng.integers(0, len(members)))
        x[row, members] = True
        extra = active - len(members)
        while extra > 0:
            pick = rng.integers(0, m, extra)
            pick = np.unique(pick[~x[row, pick] & ~np.isin(pick, layer.gates[g])])
            x[row, pick[:extra]] = True
            extra -= len(pick[:extra])
    return x, chosen


def gate_on_counts(layer: TargetedUAnd, x: np.ndarray) -> np.ndarray:
    """``(n, G)`` number of each gate's inputs that are on in boolean inputs ``x``."""
    padded = np.concatenate([x, np.zeros((x.shape[0], 1), dtype=bool)], axis=1)
    idx = np.where(layer.gates >= 0, layer.gates, x.shape[1])
    return padded[:, idx].sum(axis=-1)


def measure_targeted(layer: TargetedUAnd, x: np.ndarray) -> StatusReport:
    """Errors of every gate on boolean inputs ``x`` (``(n, m)``).

    Pairs-only layers are split into ``both``/``one``/``none``; mixed fan-in into
    ``fan{k} on`` / ``fan{k} near`` (one input short) / ``other``.
    """
    y = layer(x.astype(np.float32) @ layer.inputs.write)
    on = gate_on_counts(layer, x)
    fan = layer.fan_ins[None, :]
    target = (on == fan).astype(np.float32)
    if layer.meta.max_fan_in == 2 and (layer.fan_ins == 2).all():
        return split_by_status(y, target, on, {2: "both", 1: "one", 0: "none"})
    code = np.where(on == fan, 2 * fan, np.where(on == fan - 1, 2 * fan + 1, 0))
    names = {0: "other"}
    for k in np.unique(layer.fan_ins):
        names[int(2 * k)] = f"fan{k} on"
        names[int(2 * k + 1)] = f"fan{k} near"
    return split_by_status(y, target, code, names)


def predicted_sigma_pairs(n_gates: int, set_size: int, active: int, n_neurons: int,
                          n_inputs: int) -> float:
    """Section 5.3's collapse variable ``sqrt(2 |E| t s / (d d0))``."""
    return math.sqrt(2 * n_gates * set_size * active / (n_neurons * n_inputs))
