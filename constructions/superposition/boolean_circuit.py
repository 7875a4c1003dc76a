"""Two stacked targeted U-AND layers emulating a sparse boolean circuit (docs/superposition.md, 'Two stacked layers').

Layer 1 ANDs pairs of input features and writes each gate along a fresh random unit vector of the
residual stream (``W_out1 = R1 @ F1``), turning its one-sided hidden errors into zero-mean
residual interference. Layer 2 reads those gate features from the residual and ANDs pairs of
them. The test circuit is a set of chains ``(a AND b) AND (b AND c)``: a 3-way AND through two
layers. Without error correction, two layers are the practical depth at these sizes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from constructions.superposition.features import FeatureSpace, basis_features, random_unit_features
from constructions.superposition.metrics import ErrorStats, StatusReport, error_stats, split_by_status
from constructions.superposition.seeding import Seed, as_generator, recorded_seed, sample_distinct
from constructions.superposition.targeted import TargetedUAnd, build_targeted_uand

RESIDUAL = "res"


@dataclass(frozen=True)
class CircuitMeta:
    """Sizes and seed of a two-layer circuit."""

    d_res: int
    n_inputs: int
    n_gates1: int
    n_gates2: int
    width1: int
    width2: int
    set_size: int
    superposed_inputs: bool
    seed: int | None


@dataclass(frozen=True, eq=False)
class TwoLayerCircuit:
    """Input features, layer 1 (with its gate write vectors), layer 2, and the test chains."""

    inputs: FeatureSpace
    layer1: TargetedUAnd
    gate_features: FeatureSpace  # layer-1 gates written into the residual
    layer2: TargetedUAnd
    chains: np.ndarray  # (|E2|, 3) input features (a, b, c) of each layer-2 gate
    meta: CircuitMeta

    def run(self, x0: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(residual after layer 1, layer-1 gate readings, layer-2 gate readings)``."""
        y1 = self.layer1(x0)
        x1 = x0 + y1 @ self.gate_features.write
        return x1, y1, self.layer2(x1)

    @cached_property
    def craft_model(self):
        """``SeriesWithResiduals([layer-1 MLP writing F1, layer-2 MLP])`` (Craft)."""
        from craft.blocks import SeriesWithResiduals

        return SeriesWithResiduals([self.layer1.output_mlp(self.gate_features, name="L1"),
                                    self.layer2.mlp])


def chain_gates(n_inputs: int, n_chains: int, n_gates1: int, seed: Seed
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Chains ``(a, b, c)``, layer-1 pair gates containing ``(a,b)``, ``(b,c)`` of every chain
    (topped up with random pairs to ``n_gates1``), and layer-2 gates as pairs of layer-1 indices."""
    rng = as_generator(seed)
    chains = sample_distinct(rng, n_chains, 3, n_inputs)
    needed = np.sort(np.concatenate([chains[:, :2], chains[:, 1:]]), axis=1)
    gates1 = np.unique(needed, axis=0)
    while len(gates1) < n_gates1:
        extra = np.sort(sample_distinct(rng, n_gates1 - len(gates1), 2, n_inputs), axis=1)
        gates1 = np.unique(np.concatenate([gates1, extra]), axis=0)
    gates1 = gates1[:n_gates1] if len(gates1) > n_gates1 else gates1
    index = {tuple(g): i for i, g in enumerate(gates1.tolist())}
    if any(tuple(g) not in index for g in needed.tolist()):
        raise ValueError("n_gates1 too small for the chains' layer-1 gates")
    gates2 = np.array([[index[tuple(sorted(c[:2]))], index[tuple(sorted(c[1:]))]]
                       for c in chains.tolist()], dtype=np.int64)
    return chains, gates1, gates2


def build_two_layer_circuit(d_res: int, n_gates1: int, n_gates2: int, width1: int, width2: int,
                            set_size: int, seed: Seed, *, superposed: bool = False,
                            n_inputs: int | None = None) -> TwoLayerCircuit:
    """Build the section 7.2 circuit.

    ``superposed`` draws the ``n_inputs`` (default ``d_res``) input features as random unit
    vectors; otherwise they are the residual's basis directions (``n_inputs = d_res``).
    """
    rng = as_generator(seed)
    m0 = d_res if n_inputs is None else n_inputs
    if superposed:
        inputs = random_unit_features(RESIDUAL, m0, d_res, rng)
    else:
        if m0 != d_res:
            raise ValueError("basis-aligned inputs need n_inputs == d_res")
        inputs = basis_features(RESIDUAL, range(d_res))
    chains, gates1, gates2 = chain_gates(m0, n_gates2, n_gates1, rng)
    layer1 = build_targeted_uand(inputs, gates1, width1, set_size, rng, active=3, name="L1")
    f1 = random_unit_features(RESIDUAL, len(gates1), d_res, rng,
                              labels=[("L1", int(a), int(b)) for a, b in gates1])
    layer2 = build_targeted_uand(f1, gates2, width2, set_size, rng, active=5, name="L2")
    meta = CircuitMeta(d_res, m0, len(gates1), len(gates2), width1, width2, set_size, superposed,
                       recorded_seed(seed))
    return TwoLayerCircuit(inputs, layer1, f1, layer2, chains, meta)


@dataclass(frozen=True)
class CircuitReport:
    """Layer-1 errors by gate-input status; layer-2 errors on full, near-miss and other gates."""

    layer1: StatusReport
    layer2_on: ErrorStats
    layer2_near: ErrorStats
    layer2_others: ErrorStats

    @property
    def growth(self) -> float:
        """Layer-2 over layer-1 mean error on gates that should be on."""
        return self.layer2_on.mean_abs / self.layer1["both"].mean_abs


def circuit_inputs(circuit: TwoLayerCircuit, n: int, seed: Seed) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """3-hot inputs: the first half switch a random chain fully on, the rest two of its three
    inputs. Returns ``(active (n, 3 or 2 padded by a distractor), chain index, is_full)``."""
    rng = as_generator(seed)
    chain = rng.integers(0, len(circuit.chains), n)
    full = np.arange(n) < n // 2
    x = np.zeros((n, circuit.meta.n_inputs), dtype=bool)
    for row, c in enumerate(chain):
        members = circuit.chains[c]
        if not full[row]:
            members = np.delete(members, rng.integers(0, 3))
        x[row, members] = True
        if not full[row]:  # top up to 3 active features with a distractor outside the chain
            while True:
                extra = rng.integers(0, circuit.meta.n_inputs)
                if extra not in circuit.chains[c]:
                    x[row, extra] = True
                    break
    return x, chain, full


def measure_circuit(circuit: TwoLayerCircuit, n: int, seed: Seed) -> CircuitReport:
    """Run ``n`` :func:`circuit_inputs` through both layers and split the errors."""
    x, chain, full = circuit_inputs(circuit, n, seed)
    x0 = x.astype(np.float32) @ circuit.inputs.write
    _, y1, y2 = circuit.run(x0)
    on1 = x[:, circuit.layer1.gates].sum(axis=-1)
    layer1 = split_by_status(y1, (on1 == 2).astype(np.float32), on1, {2: "both", 1: "one", 0: "none"})
    true1 = on1 == 2
    t2 = true1[:, circuit.layer2.gates].all(axis=-1)
    near = np.zeros_like(t2)
    near[np.flatnonzero(~full), chain[~full]] = True
    near &= ~t2
    others = ~t2 & ~near
    return CircuitReport(layer1, error_stats(y2[t2], np.ones(t2.sum())),
                         error_stats(y2[near], np.zeros(near.sum())),
                         error_stats(y2[others], np.zeros(others.sum())))
