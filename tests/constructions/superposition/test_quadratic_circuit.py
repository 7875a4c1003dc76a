"""Acceptance tests for the quadratic universal AND and two stacked layers."""

import numpy as np
import pytest

from constructions.superposition.boolean_circuit import build_two_layer_circuit, measure_circuit
from constructions.superposition.features import random_unit_features
from constructions.superposition.quadratic import build_quadratic_uand, measure_quadratic, quadratic_readout, universal_lift
from constructions.superposition.targeted import random_pair_gates


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-9), (np.float32, 1e-3)])
def test_universal_quadratic_map_exact(dtype, tol):
    rng = np.random.default_rng(0)
    forms = rng.standard_normal((6, 32, 32)).astype(dtype)
    x = rng.standard_normal((50, 32)).astype(dtype)
    lift = universal_lift(32, dtype)
    assert lift.shape == (32, 32 * 32)
    got = ((x @ lift) ** 2) @ quadratic_readout(forms).astype(dtype)
    want = np.einsum("ni,gij,nj->ng", x, forms, x)
    assert np.abs(got - want).max() <= tol * max(1.0, np.abs(want).max())


def test_quadratic_uand():
    feats = random_unit_features("q", 1024, 32, 0, dtype=np.float64)
    layer = build_quadratic_uand(feats, random_pair_gates(1024, 300, 1))
    assert layer.meta.n_neurons == 1024
    for active, limit in ((2, 0.06), (3, 0.09)):
        rep = measure_quadratic(layer, 400, active, seed=active)
        assert rep.violations == 0
        assert rep.bound == pytest.approx(layer.meta.error_bound(active))
        assert rep.errors.overall.mean_abs <= limit


def test_quadratic_normalised_two_hot_exact():
    feats = random_unit_features("q", 256, 16, 0, dtype=np.float64)
    gates = random_pair_gates(256, 50, 1)
    layer = build_quadratic_uand(feats, gates, normalise=True)
    x = feats.write[gates[:, 0]] + feats.write[gates[:, 1]]
    np.testing.assert_allclose(np.diagonal(layer(x)), 1.0, atol=1e-9)


@pytest.mark.parametrize("seed", [0, 1])
def test_two_layer_circuit(seed):
    circuit = build_two_layer_circuit(512, 1024, 256, 1024, 1024, 8, seed)
    rep = measure_circuit(circuit, 400, seed + 10)
    assert rep.layer1["both"].mean_abs <= 0.06
    assert 0.10 <= rep.layer2_on.mean_abs <= 0.35
    assert rep.layer2_on.accuracy >= 0.85
    assert rep.growth >= 2
    assert rep.layer2_others.accuracy >= 0.999
