"""Universal AND (U-AND) MLP layers (docs/superposition.md, 'U-AND').

One ReLU layer whose neurons are wired to input features at random with density ``p`` and share
the bias ``-(k-1)``. A neuron wired to every input of a fan-in-``k`` gate fires (value >= 1) when
they are all on; the gate is read out as the uniform average over the neurons wired to all of its
inputs (the gate's *intersection*). The inputs may be basis-aligned (section 1) or random unit
vectors in superposition (section 4); the wiring is always between *features* and neurons, and the
physical first-layer matrix is ``W_in = F.T @ wiring``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from constructions.superposition.features import FeatureSpace, basis_features
from constructions.superposition.readout import SparseReadout, from_indicator
from constructions.superposition.seeding import Seed, as_generator, recorded_seed

WORST_CASE_BUDGET = 1 << 32  # flops allowed for the exact ell=2 worst case at build time


def paper_p(d0: int, d: int) -> float:
    """The source's asymptotic density ``min(1, log(d0)^2 / sqrt(d))`` (natural log).

    Only a reference: at testable sizes it is >= 1 or far too dense; pass ``p`` explicitly.
    """
    return min(1.0, math.log(d0) ** 2 / math.sqrt(d))


def predicted_mean_errors(fan_in: int, density: float, active: int) -> dict[int, float]:
    """Expected |error| per status (number of gate inputs on) with ``active`` features on.

    A neuron in the gate's intersection with ``j`` gate inputs on and ``active - j`` others
    outputs ``max(0, j - fan_in + 1 + Bin(active - j, p))``; the error subtracts the target 1 when
    ``j == fan_in``. For pairs this is ``(s-2)p``, ``(s-1)p`` and ``sp - 1 + (1-p)^s``.
    """
    out = {}
    for j in range(0, min(fan_in, active) + 1):
        n_other = active - j
        b = np.arange(n_other + 1)
        pmf = np.array([math.comb(n_other, x) for x in b]) * density**b * (1 - density) ** (n_other - b)
        value = float(np.sum(pmf * np.maximum(0, j - fan_in + 1 + b)))
        out[j] = value - (1.0 if j == fan_in else 0.0)
    return out


@dataclass(frozen=True)
class UAndMeta:
    """Build parameters and build-time facts of a U-AND layer."""

    n_features: int
    n_inputs: int  # physical input dimension d0
    n_neurons: int
    density: float
    fan_in: int
    bias: float
    seed: int | None
    n_gates: int
    superposed: bool
    min_intersection: int
    mean_intersection: float
    max_intersection: int
    active: int  # sparsity the predictions below are stated for
    predicted_mean_error: tuple[tuple[int, float], ...]  # (gate inputs on, mean |err|)
    predicted_sigma: float  # preactivation noise sqrt(p m s / d0) from superposition (0 if aligned)
    worst_one_on_ell2: float | None  # exact max one-on error for 2-hot inputs (pairs, aligned)


@dataclass(frozen=True, eq=False)
class UAnd:
    """A U-AND layer: weights, its gates, and the readout over the gates' intersections."""

    inputs: FeatureSpace
    wiring: np.ndarray  # (n_features, d) bool: feature i wired to neuron n
    w_in: np.ndarray  # (d0, d) physical first-layer matrix
    bias: np.ndarray  # (d,)
    gates: np.ndarray  # (G, fan_in) feature indices
    intersection_sizes: np.ndarray  # (G,)
    meta: UAndMeta
    name: str = "uand"

    def hidden(self, x: np.ndarray) -> np.ndarray:
        """ReLU activations for physical inputs ``x`` of shape ``(n, d0)``."""
        return np.maximum(np.asarray(x, dtype=self.w_in.dtype) @ self.w_in + self.bias, 0.0)

    @cached_property
    def readout(self) -> SparseReadout:
        """Normalised intersection indicators of the layer's gates (built on first use)."""
        return from_indicator(gate_indicator(self.wiring, self.gates))

    def read(self, hidden: np.ndarray) -> np.ndarray:
        """Gate readings ``(n, G)`` from hidden activations."""
        return self.readout.apply(hidden)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.read(self.hidden(x))

    def read_gates(self, hidden: np.ndarray, gates: np.ndarray, *, empty: str = "raise") -> np.ndarray:
        """Readings of arbitrary gates, per input: ``gates`` is ``(n, P, k)``; returns ``(n, P)``.

        Used to sample a few gates per input without materialising the readout of all of them.
        A gate with an empty intersection has no readout: ``empty="raise"`` raises, ``"nan"``
        marks it NaN (never a silent 0).
        """
        out = np.empty(gates.shape[:2], dtype=np.float32)
        for row in range(gates.shape[0]):
            ind = np.logical_and.reduce(self.wiring[gates[row]], axis=1)
            sizes = ind.sum(axis=1)
            if (sizes == 0).any() and empty == "raise":
                raise ValueError(f"gate {gates[row][sizes == 0][0].tolist()} has an empty intersection")
            with np.errstate(invalid="ignore", divide="ignore"):
                out[row] = np.where(sizes > 0, (ind @ hidden[row]) / np.maximum(sizes, 1), np.nan)
        return out

    @cached_property
    def mlp(self):
        """This layer as a Craft ``MLP`` (see :mod:`constructions.superposition.craft_blocks`)."""
        from constructions.superposition.craft_blocks import boolean_mlp

        return boolean_mlp(self.inputs, self.w_in, self.bias, self.readout.dense,
                           [tuple(self.inputs.labels[i] for i in g) for g in self.gates],
                           name=self.name)


def all_gates(n_features: int, fan_in: int) -> np.ndarray:
    """Every ``fan_in``-subset of ``range(n_features)`` as rows of a ``(C(m, k), k)`` array."""
    if fan_in == 2:
        return np.stack(np.triu_indices(n_features, k=1), axis=1)
    return np.array(list(itertools.combinations(range(n_features), fan_in)), dtype=np.int64)


def gate_indicator(wiring: np.ndarray, gates: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """``(G, d)`` bool: neuron wired to every input of the gate."""
    out = np.empty((gates.shape[0], wiring.shape[1]), dtype=bool)
    for s in range(0, gates.shape[0], chunk):
        out[s:s + chunk] = np.logical_and.reduce(wiring[gates[s:s + chunk]], axis=1)
    return out


def intersection_sizes(wiring: np.ndarray, gates: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """``|intersection of S_i over the gate|`` for every gate, vectorised.

    Pairs use one ``wiring @ wiring.T`` product (exact in float32 below 2^24 neurons).
    """
    m = wiring.shape[0]
    if gates.shape[1] == 2 and m <= 8192:
        w = wiring.astype(np.float32)
        counts = w @ w.T
        return counts[gates[:, 0], gates[:, 1]].astype(np.int64)
    sizes = np.empty(gates.shape[0], dtype=np.int64)
    for s in range(0, gates.shape[0], chunk):
        sizes[s:s + chunk] = np.logical_and.reduce(wiring[gates[s:s + chunk]], axis=1).sum(axis=1)
    return sizes


def _worst_one_on_ell2(wiring: np.ndarray, gates: np.ndarray, sizes: np.ndarray) -> float | None:
    """Exact max over gates (i, j) and k not in it of ``|S_ij & S_k| / |S_ij|``, if affordable."""
    g, d = gates.shape[0], wiring.shape[1]
    m = wiring.shape[0]
    if gates.shape[1] != 2 or g * d * m > WORST_CASE_BUDGET:
        return None
    ind = gate_indicator(wiring, gates).astype(np.float32)
    overlap = ind @ wiring.T.astype(np.float32)  # (G, m)
    overlap[np.arange(g), gates[:, 0]] = 0.0
    overlap[np.arange(g), gates[:, 1]] = 0.0
    return float((overlap / sizes[:, None]).max())


def build_uand(inputs: int | FeatureSpace, n_neurons: int, density: float, seed: Seed, *,
               fan_in: int = 2, gates: np.ndarray | None = None, active: int | None = None,
               name: str = "uand") -> UAnd:
    """Build a U-AND layer (docs/superposition.md, 'U-AND').

    Args:
      inputs: number of basis-aligned boolean inputs ``d0`` or a :class:`FeatureSpace` holding
        them (random unit features = inputs in superposition, section 4).
      n_neurons: width ``d``.
      density: wiring probability ``p`` (free at finite size; see :func:`paper_p`).
      seed: int or numpy Generator.
      fan_in: ``k``; the bias is ``-(k-1)``.
      gates: ``(G, k)`` feature indices to read out; default every ``k``-subset.
      active: sparsity ``s`` for the predicted errors in the metadata (default ``fan_in + 1``).

    Raises ``ValueError`` if any gate's intersection is empty (its readout would be undefined).
    """
    features = basis_features(f"{name}_in", range(inputs)) if isinstance(inputs, int) else inputs
    m = features.n_features
    rng = as_generator(seed)
    wiring = rng.random((m, n_neurons), dtype=np.float32) < density
    w_float = wiring.astype(np.float32)
    w_in = w_float if features.basis_aligned else features.write.T.astype(np.float32) @ w_float
    bias = np.full(n_neurons, -(fan_in - 1), dtype=np.float32)
    gates = all_gates(m, fan_in) if gates is None else np.asarray(gates, dtype=np.int64)
    if gates.ndim != 2 or gates.shape[1] != fan_in:
        raise ValueError(f"gates must have shape (G, {fan_in}), got {gates.shape}")
    sizes = intersection_sizes(wiring, gates)
    empty = np.flatnonzero(sizes == 0)
    if empty.size:
        raise ValueError(
            f"{empty.size} of {len(gates)} gates have no neuron wired to all their inputs "
            f"(first: {gates[empty[0]].tolist()}); raise n_neurons or density (need d p^{fan_in} >> 1)")
    s = fan_in + 1 if active is None else active
    sigma = 0.0 if features.basis_aligned else math.sqrt(density * m * s / features.n_dims)
    meta = UAndMeta(
        n_features=m, n_inputs=features.n_dims, n_neurons=n_neurons, density=density,
        fan_in=fan_in, bias=float(-(fan_in - 1)), seed=recorded_seed(seed), n_gates=len(gates),
        superposed=not features.basis_aligned, min_intersection=int(sizes.min()),
        mean_intersection=float(sizes.mean()), max_intersection=int(sizes.max()), active=s,
        predicted_mean_error=tuple(predicted_mean_errors(fan_in, density, s).items()),
        predicted_sigma=sigma,
        worst_one_on_ell2=_worst_one_on_ell2(wiring, gates, sizes) if features.basis_aligned else None,
    )
    return UAnd(features, wiring, w_in, bias, gates, sizes, meta, name)
