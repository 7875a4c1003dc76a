"""Acceptance tests for targeted superposed AND and mixed fan-in."""

import numpy as np
import pytest

from constructions.superposition.features import random_unit_features
from constructions.superposition.seeding import sample_distinct
from constructions.superposition.targeted import (
    build_targeted_uand,
    gate_inputs,
    measure_targeted,
    predicted_sigma_pairs,
    random_pair_gates,
)

FEATURES = 2048


@pytest.fixture(scope="module")
def features():
    return random_unit_features("res", FEATURES, 256, 0)


def _run(features, n_gates, width, seed=1):
    gates = random_pair_gates(FEATURES, n_gates, seed)
    layer = build_targeted_uand(features, gates, width, 8, seed + 1)
    x, _ = gate_inputs(layer, 400, 2, seed + 2)
    return layer, measure_targeted(layer, x)


def test_uand_targeted_capacity(features):
    layer, rep = _run(features, 1024, 1024)
    assert rep.overall.accuracy >= 0.999 and rep["one"].mean_abs <= 0.2
    assert layer.meta.mean_neuron_fan_in == pytest.approx(2 * 1024 * 8 / 1024, rel=0.05)
    assert layer.meta.predicted_sigma == pytest.approx(predicted_sigma_pairs(1024, 8, 2, 1024, 256), rel=0.05)
    _, rep4k = _run(features, 4096, 1024)
    assert rep4k.overall.accuracy >= 0.98
    _, rep16k = _run(features, 16384, 1024)
    assert rep16k.overall.accuracy <= 0.85  # capacity really is exceeded
    _, wide = _run(features, 8192, 2048)
    assert abs(rep4k["one"].mean_abs - wide["one"].mean_abs) <= 0.05  # collapse on sigma


def _mixed_gates(m, n, rng):
    pairs = sample_distinct(rng, n // 2, 2, m)
    triples = sample_distinct(rng, n - n // 2, 3, m)
    return [tuple(g) for g in pairs] + [tuple(g) for g in triples]


def test_mixed_fanin_preactivation_identities():
    rng = np.random.default_rng(0)
    layer = build_targeted_uand(64, _mixed_gates(64, 16, rng), 512, 8, 1, active=4)
    assert layer.meta.max_fan_in == 3 and layer.meta.bias == -2
    use = np.bincount(layer.sets.ravel(), minlength=512)
    for g in range(layer.meta.n_gates):
        k = layer.fan_ins[g]
        members = layer.gates[g, :k]
        own = layer.sets[g][use[layer.sets[g]] == 1]  # neurons no other gate uses
        np.testing.assert_allclose(layer.wiring[np.ix_(members, own)], 3 / k)
        x = np.zeros((2, 64), dtype=np.float32)
        x[0, members] = 1
        x[1, members[:-1]] = 1
        pre = x @ layer.w_in + layer.bias
        np.testing.assert_allclose(pre[0, own], 1.0, atol=1e-6)  # k * K/k - K + 1
        np.testing.assert_allclose(pre[1, own], 1 - 3 / k, atol=1e-6)  # one input short
        assert np.all(pre[1, own] <= 1e-6)


def _mixed_report(inputs, n_gates, seed):
    rng = np.random.default_rng(seed)
    layer = build_targeted_uand(inputs, _mixed_gates(FEATURES, n_gates, rng), 1024, 8, seed + 1,
                                active=4)
    on, _ = gate_inputs(layer, 200, 4, seed + 2)
    near, _ = gate_inputs(layer, 200, 4, seed + 3, near=True)
    return measure_targeted(layer, np.concatenate([on, near]))


def test_mixed_fanin_basis_aligned():
    rep = _mixed_report(FEATURES, 1024, 0)
    for name in ("fan2 on", "fan2 near", "fan3 on", "fan3 near", "other"):
        assert rep[name].accuracy >= 0.99, name
    assert rep["fan2 on"].mean_abs <= 0.06 and rep["fan3 on"].mean_abs <= 0.06


def test_mixed_fanin_superposed(features):
    rep = _mixed_report(features, 1024, 0)
    assert rep["other"].accuracy >= 0.999
    assert rep["fan2 on"].mean_abs <= 0.4 and rep["fan3 on"].mean_abs <= 0.4
