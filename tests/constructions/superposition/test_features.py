"""Feature spaces and metrics: basic properties."""

import numpy as np
import pytest

from constructions.superposition.features import basis_features, random_unit_features
from constructions.superposition.metrics import error_stats, split_by_status
from constructions.superposition.seeding import as_generator, sample_distinct


def test_basis_features_are_identity():
    feats = basis_features("x", ["a", "b", "c"])
    assert feats.coherence().max_abs == 0.0
    np.testing.assert_array_equal(feats.embed(np.array([[0, 2]])), [[1, 0, 1]])
    assert [d.value for d in feats.space.basis] == ["a", "b", "c"]


def test_random_features_unit_and_seeded():
    a = random_unit_features("r", 300, 50, 4)
    b = random_unit_features("r", 300, 50, 4)
    np.testing.assert_array_equal(a.write, b.write)
    np.testing.assert_allclose(np.linalg.norm(a.write, axis=1), 1.0, atol=1e-5)
    coh = a.coherence()
    assert coh.rms == pytest.approx(1 / np.sqrt(50), rel=0.1) and coh.max_abs < 1
    assert a.interference_budget(3).read_noise_rms == pytest.approx(np.sqrt(3) * coh.rms)
    assert a.seed == 4


def test_sample_distinct_rows_are_distinct():
    rows = sample_distinct(as_generator(0), 500, 6, 10)
    assert all(len(set(r)) == 6 for r in rows.tolist())
    with pytest.raises(TypeError):
        as_generator(1.5)


def test_status_split():
    rep = split_by_status(np.array([1.0, 0.2, 0.7]), np.array([1, 0, 0]), np.array([2, 1, 1]),
                          {2: "both", 1: "one"})
    assert rep["both"].max_abs == 0 and rep["one"].count == 2
    assert rep["one"].accuracy == 0.5
    assert error_stats(np.array([0.4]), np.array([1])).accuracy == 0.0
