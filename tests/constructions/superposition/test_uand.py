"""Acceptance tests for the U-AND family (thresholds as docs/superposition.md states them)."""

import numpy as np
import pytest

from constructions.superposition.features import random_unit_features
from constructions.superposition.inclusion_exclusion import (
    build_ie_read,
    calibrated_coefficients,
    idealised_read,
    measure_ie,
    mobius_coefficients,
)
from constructions.superposition.measure_uand import (
    exhaustive_inputs,
    measure_superposed,
    measure_uand,
    measure_xor,
    misfire_point,
    random_inputs,
    uand_readings,
    xor_readings,
)
from constructions.superposition.uand import build_uand, paper_p, predicted_mean_errors

P = 0.15


@pytest.fixture(scope="module", params=[0, 1])
def basic(request):
    return build_uand(64, 2048, P, request.param)


def test_uand_basic_ell2_exhaustive(basic):
    assert basic.meta.min_intersection >= 1
    rep = measure_uand(basic, exhaustive_inputs(64, 2))
    assert rep["both"].max_abs <= 1e-5  # exact
    assert rep.overall.min_signed >= -1e-5  # one-sided
    assert rep["one"].max_abs <= 0.60
    assert rep["none"].max_abs <= 0.35
    assert 0.14 <= rep["one"].mean_abs <= 0.16
    assert rep.overall.accuracy >= 0.9999
    # the build-time exact worst case is what the exhaustive run finds
    assert basic.meta.worst_one_on_ell2 == pytest.approx(rep["one"].max_abs, abs=1e-5)


def test_uand_basic_ell3_sampled(basic):
    rep = measure_uand(basic, random_inputs(64, 3, 5000, seed=basic.meta.seed + 100))
    assert rep["both"].max_abs <= 0.60
    assert rep["one"].max_abs <= 1.0
    assert abs(rep["both"].mean_abs - 0.15) <= 0.015
    assert abs(rep["one"].mean_abs - 0.30) <= 0.015
    assert abs(rep["none"].mean_abs - 0.064) <= 0.01
    predicted = dict(basic.meta.predicted_mean_error)
    assert predicted[2] == pytest.approx(0.15) and predicted[1] == pytest.approx(0.30)
    assert predicted[0] == pytest.approx(3 * P - 1 + (1 - P) ** 3)


def test_uand_monotone_and_one_sided():
    layer = build_uand(64, 2048, P, 2)
    rng = np.random.default_rng(3)
    base = random_inputs(64, 2, 200, seed=4)
    extra = np.array([rng.choice(np.setdiff1d(np.arange(64), row)) for row in base])
    y_small, _ = uand_readings(layer, base)
    y_big, _ = uand_readings(layer, np.concatenate([base, extra[:, None]], axis=1))
    assert np.all(y_big >= y_small - 1e-6)
    assert np.all(np.asarray(layer.w_in) >= 0) and np.all(layer.readout.values >= 0)


def test_xor_readoff():
    layer = build_uand(64, 2048, P, 0)
    inputs = exhaustive_inputs(64, 2)
    xor_hat, xor_true, and_err = xor_readings(layer, inputs)
    np.testing.assert_allclose(xor_hat - xor_true, -2 * and_err, atol=1e-5)
    assert measure_xor(layer, inputs).overall.max_abs <= 1.2


def test_fanin3():
    layer = build_uand(32, 4096, 0.2, 0, fan_in=3)
    assert layer.meta.bias == -2 and layer.meta.min_intersection >= 5
    rep3 = measure_uand(layer, random_inputs(32, 3, 1000, seed=1))
    assert rep3[3].max_abs <= 1e-5
    assert 0.17 <= rep3[2].mean_abs <= 0.23 and rep3[2].max_abs <= 0.75
    rep4 = measure_uand(layer, random_inputs(32, 4, 1000, seed=2))
    assert 0.17 <= rep4[3].mean_abs <= 0.23
    assert 0.36 <= rep4[2].mean_abs <= 0.44


def test_inclusion_exclusion_signs_on_idealised_reads():
    # |I| = 2 reads +v_ij; |I| = 4 all-on reads 6*1 - 4*2 + 1*3 = 1; every strict subset reads 0.
    assert mobius_coefficients(2).by_size == (1.0,)
    for k in (2, 3, 4, 5):
        coeffs = mobius_coefficients(k)
        for size in range(k + 1):
            expected = 1.0 if size == k else 0.0
            assert idealised_read(k, coeffs, range(size)) == pytest.approx(expected)
    np.testing.assert_allclose(calibrated_coefficients(3, 0.2).by_size, (1.25, -1.75), atol=1e-9)
    np.testing.assert_allclose(calibrated_coefficients(4, 0.2).by_size, (1.5625, -2.1875, 2.375),
                               atol=1e-9)


def test_inclusion_exclusion_calibrated_beats_mobius():
    layer = build_uand(32, 4096, 0.2, 0)
    rng = np.random.default_rng(5)
    gates = np.array([np.sort(rng.choice(32, 3, replace=False)) for _ in range(40)])
    plain = measure_ie(build_ie_read(layer, gates, mobius_coefficients(3)), 0, seed=1)
    calib = measure_ie(build_ie_read(layer, gates, calibrated_coefficients(3, 0.2)), 0, seed=1)
    assert calib.overall.mean_abs <= 0.06 and calib.overall.max_abs <= 0.35
    assert calib.overall.mean_abs < plain.overall.mean_abs


def _superposed(d0, m, seed=0, d=2048, p=0.1):
    feats = random_unit_features("res", m, d0, seed)
    layer = build_uand(feats, d, p, seed + 1, gates=np.array([[0, 1]]), active=2)
    return measure_superposed(layer, 300, 50, 2, seed=seed + 2)


def test_uand_superposed_collapse():
    small = _superposed(256, 128)
    assert small.overall.accuracy >= 0.97 and small["one"].mean_abs <= 0.26
    big = _superposed(256, 1024)
    assert 0.33 <= big["one"].mean_abs <= 0.52
    same_sigma = _superposed(128, 512)
    assert abs(same_sigma["one"].mean_abs - big["one"].mean_abs) <= 0.08


def test_uand_superposed_misfire_point_doubles_with_d0():
    def first_failure(d0):
        return misfire_point(lambda m: _superposed(d0, m), [64, 128, 256, 512, 1024, 2048, 4096])

    assert first_failure(256) > first_failure(128)


def test_uand_builds_large():
    # Build time is measured by benchmarks/superposition.py, not asserted here.
    layer = build_uand(1024, 8192, 0.05, 0)
    assert layer.meta.n_gates == 1024 * 1023 // 2 and layer.meta.min_intersection >= 1


def test_empty_intersection_raises():
    with pytest.raises(ValueError, match="no neuron wired"):
        build_uand(64, 64, 0.05, 0)


def test_paper_p_and_predictions():
    assert paper_p(64, 100) == 1.0 and paper_p(64, 10**6) < 1
    pred = predicted_mean_errors(2, 0.1, 2)
    assert pred[2] == 0 and pred[1] == pytest.approx(0.1)
