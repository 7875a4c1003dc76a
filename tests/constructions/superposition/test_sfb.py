"""Acceptance and property tests for skip feature-bigram heads."""

import numpy as np
import pytest

from constructions.superposition.features import basis_features, random_unit_features
from constructions.superposition.measure_sfb import count_error, measure_bigrams, measure_cliques
from constructions.superposition.sfb import (
    bigram_matrix,
    build_sfb_cliques,
    build_sfb_exact,
    build_sfb_random_projection,
    build_sfb_svd,
    disjoint_cliques,
    random_bigrams,
)


@pytest.fixture(scope="module")
def orthonormal():
    return basis_features("e", range(64), dtype=np.float64)


@pytest.fixture(scope="module")
def superposed():
    return random_unit_features("r", 2048, 128, 0, dtype=np.float64)


def test_exact_bigrams(orthonormal):
    head = build_sfb_exact(orthonormal, random_bigrams(64, 8, 0))
    assert head.w_q.shape == (64, 8) and head.meta.factor_residual <= 1e-9
    assert count_error(head, 2000, 2, seed=1) <= 1e-9
    # token-level table has ones exactly at the bigrams
    table = np.zeros((64, 64))
    table[head.bigrams[:, 0], head.bigrams[:, 1]] = 1
    np.testing.assert_allclose(head.w_qk, table, atol=1e-12)


def test_exact_cliques(orthonormal):
    cliques = disjoint_cliques(64, 8, 8, 0, shared_roles=True)
    head = build_sfb_cliques(orthonormal, cliques)
    assert head.meta.n_bigrams == 512 and head.w_q.shape == (64, 8)
    assert head.meta.factor_residual <= 1e-9
    assert count_error(head, 2000, 2, seed=1) <= 1e-9


@pytest.mark.parametrize("size", [4, 16])
def test_cliques_in_superposition(superposed, size):
    cliques = disjoint_cliques(2048, 16, size, 1)
    head = build_sfb_cliques(superposed, cliques)
    predicted = np.sqrt(16) * size / 128
    assert head.meta.predicted_rms_absent == pytest.approx(predicted)
    rep = measure_cliques(head, cliques, 2000, seed=2)
    assert abs(rep.classes["neither"].rms - predicted) <= 0.15 * predicted


def test_random_projection_capacity(superposed):
    accs = []
    for ratio in (1 / 16, 1 / 4, 1, 4):
        bigrams = random_bigrams(2048, int(ratio * 128 * 16), 3)
        head = build_sfb_random_projection(superposed, bigrams, 16, 4)
        assert head.w_q.shape == (128, 16) and head.w_k.shape == (128, 16)
        rep = measure_bigrams(head, 2000, seed=5)
        accs.append(rep.balanced_accuracy)
        if ratio == 1 / 16:
            assert rep.balanced_accuracy >= 0.87
        if ratio == 1:
            assert 0.85 <= rep.classes["absent"].rms <= 1.35
    assert all(a > b for a, b in zip(accs, accs[1:]))


def test_svd_exact_for_low_rank_and_lossy_for_unstructured(superposed):
    bigrams = random_bigrams(2048, 16, 0)
    head = build_sfb_svd(superposed, bigrams, 16)
    np.testing.assert_allclose(head.w_qk, bigram_matrix(superposed, bigrams), atol=1e-9)
    lossy = build_sfb_svd(superposed, random_bigrams(2048, 256, 0), 16)
    assert lossy.meta.factor_residual > 0.1


def test_heads_keep_width_d_qk(superposed):
    head = build_sfb_random_projection(superposed, random_bigrams(2048, 128, 0), 16, 1).head()
    assert head.w_q.shape == (128, 16) and head.w_k.shape == (128, 16)
    np.testing.assert_allclose(head.w_q @ head.w_k.T, head.w_qk.matrix, atol=1e-9)
