"""Error measurement for the U-AND family (docs/superposition.md, 'U-AND').

Each function evaluates the layer on a stated input set and returns errors split by how many of a
gate's own inputs are on (``both`` / ``one`` / ``none`` for pairs, the count for larger fan-in).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from constructions.superposition.features import boolean_matrix, sample_active_sets
from constructions.superposition.metrics import StatusReport, split_by_status
from constructions.superposition.seeding import Seed, as_generator, sample_distinct
from constructions.superposition.uand import UAnd

PAIR_STATUS = {2: "both", 1: "one", 0: "none"}


def exhaustive_inputs(n_features: int, active: int) -> np.ndarray:
    """All ``C(m, s)`` active sets of exactly ``s`` features (worst case by monotonicity)."""
    if active == 2:
        return np.stack(np.triu_indices(n_features, k=1), axis=1)
    return np.array(list(itertools.combinations(range(n_features), active)), dtype=np.int64)


def random_inputs(n_features: int, active: int, n: int, seed: Seed) -> np.ndarray:
    """``n`` uniformly random active sets of ``s`` distinct features."""
    return sample_distinct(as_generator(seed), n, active, n_features)


def gate_status(active: np.ndarray, gates: np.ndarray, n_features: int) -> np.ndarray:
    """``(n, G)`` number of each gate's inputs that are on in each input."""
    x = boolean_matrix(active, n_features)
    return x[:, gates].sum(axis=-1)


def uand_readings(uand: UAnd, active: np.ndarray, chunk: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """``(readings, status)``, both ``(n, G)``, for active sets ``(n, s)``."""
    reads, status = [], []
    for s in range(0, active.shape[0], chunk):
        block = active[s:s + chunk]
        reads.append(uand(uand.inputs.embed(block)))
        status.append(gate_status(block, uand.gates, uand.meta.n_features))
    return np.concatenate(reads), np.concatenate(status)


def measure_uand(uand: UAnd, active: np.ndarray) -> StatusReport:
    """Errors of every gate of ``uand`` on the inputs ``active`` (``(n, s)`` feature indices).

    The target of a gate is 1 exactly when all its inputs are on. Pass
    :func:`exhaustive_inputs` for an exhaustive check or :func:`random_inputs` for a sample.
    """
    y, status = uand_readings(uand, active)
    k = uand.meta.fan_in
    names = PAIR_STATUS if k == 2 else None
    return split_by_status(y, (status == k).astype(np.float32), status, names)


def xor_readings(uand: UAnd, active: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(xor_hat, xor_true, and_error)`` for every pair gate: ``x_i + x_j - 2 AND_hat``.

    The raw inputs come from the residual (feature reads of the physical input), so no extra
    neurons are needed; see docs/superposition.md, 'U-AND'.
    """
    if uand.meta.fan_in != 2:
        raise ValueError("XOR read-off needs a pairwise (fan-in 2) U-AND")
    x = uand.inputs.embed(active)
    feats = uand.inputs.read_all(x)
    and_hat = uand(x)
    xi, xj = feats[:, uand.gates[:, 0]], feats[:, uand.gates[:, 1]]
    xor_hat = xi + xj - 2.0 * and_hat
    status = gate_status(active, uand.gates, uand.meta.n_features)
    xor_true = (status == 1).astype(np.float32)
    and_error = and_hat - (status == 2)
    return xor_hat, xor_true, and_error


def measure_xor(uand: UAnd, active: np.ndarray) -> StatusReport:
    """XOR read-off errors, split by gate-input status like :func:`measure_uand`."""
    xor_hat, xor_true, _ = xor_readings(uand, active)
    status = gate_status(active, uand.gates, uand.meta.n_features)
    return split_by_status(xor_hat, xor_true, status, PAIR_STATUS)


def superposed_samples(uand: UAnd, n_inputs: int, n_pairs: int, active: int, seed: Seed
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Section 4.3 sample: inputs with ``active`` on features, and per input the gates to read.

    Per input: the pair of its first two active features (``both``), ``n_pairs`` pairs with
    exactly one active member (``one``) and ``n_pairs`` with none (``none``). Returns
    ``(active_sets (n, s), gates (n, 1 + 2 n_pairs, 2))``.
    """
    rng = as_generator(seed)
    m = uand.meta.n_features
    sets = sample_distinct(rng, n_inputs, active, m)
    both = sets[:, None, :2]
    on = sets[np.arange(n_inputs)[:, None], rng.integers(0, active, (n_inputs, n_pairs))]
    off_for_one = sample_active_sets(rng, n_inputs * n_pairs, 1, m,
                                     exclude=np.repeat(sets, n_pairs, axis=0))
    one = np.stack([on, off_for_one.reshape(n_inputs, n_pairs)], axis=-1)
    none = sample_active_sets(rng, n_inputs * n_pairs, 2, m, exclude=np.repeat(sets, n_pairs, axis=0))
    none = none.reshape(n_inputs, n_pairs, 2)
    return sets, np.concatenate([both, one, none], axis=1)


def measure_superposed(uand: UAnd, n_inputs: int = 300, n_pairs: int = 50, active: int = 2,
                       seed: Seed = 0, *, empty: str = "raise") -> StatusReport:
    """Errors of a U-AND with superposed inputs on the :func:`superposed_samples` protocol.

    Sampled pairs with an empty intersection raise, or with ``empty="skip"`` are left out of
    the report (their number is ``n_inputs * (1 + 2 n_pairs) - report.overall.count``).
    """
    sets, gates = superposed_samples(uand, n_inputs, n_pairs, active, seed)
    y = uand.read_gates(uand.hidden(uand.inputs.embed(sets)), gates,
                        empty="nan" if empty == "skip" else "raise")
    status = np.concatenate([np.full((n_inputs, 1), 2), np.full((n_inputs, n_pairs), 1),
                             np.full((n_inputs, n_pairs), 0)], axis=1)
    keep = ~np.isnan(y)
    return split_by_status(y[keep], (status[keep] == 2).astype(np.float32), status[keep], PAIR_STATUS)


def misfire_point(report_for_m, ms: list[int], threshold: float = 0.9) -> int | None:
    """First ``m`` in ``ms`` whose measured acc@0.5 falls below ``threshold`` (None if none).

    ``report_for_m(m)`` builds and measures a layer with ``m`` superposed features.
    """
    for m in ms:
        if report_for_m(m).overall.accuracy < threshold:
            return m
    return None


def sigma(density: float, n_features: int, active: int, n_inputs: int) -> float:
    """Predicted preactivation noise ``sqrt(p m s / d0)`` of section 4.2."""
    return math.sqrt(density * n_features * active / n_inputs)
