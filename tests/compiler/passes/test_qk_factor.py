"""Exact sparse factors of query-key matrices."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.passes.qk_factor import sparse_factors


def _nonzeros(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.count_nonzero(a) + np.count_nonzero(b))


@pytest.mark.parametrize("m", [1, 2, 7, 64, 300])
def test_order_comparison_gets_a_dyadic_cover_with_m_log_m_non_zeros(m):
    values = np.random.default_rng(m).permutation(m)  # keys in a scrambled residual order
    matrix = 100.0 * (values[None, :] < values[:, None])  # [query, key] = key < query
    a, b = sparse_factors(matrix)
    assert np.array_equal(a @ b.T, matrix)  # exact: one product per score
    bound = 2 * m * (int(np.log2(max(m, 1))) + 1)
    assert _nonzeros(a, b) <= bound
    if m >= 64:
        assert _nonzeros(a, b) < np.count_nonzero(matrix) / 3


def test_components_are_factored_separately_and_exactly():
    rng = np.random.default_rng(0)
    block = rng.integers(0, 3, size=(5, 4)).astype(np.float64)
    matrix = np.zeros((8, 9))
    matrix[:5, :4] = block  # a general block: identity factors
    matrix[5:, 4:8] = 7.0 * np.tril(np.ones((3, 4)), 0)  # a small staircase
    matrix[7, 8] = 49.5  # a BOS-like single entry
    a, b = sparse_factors(matrix)
    np.testing.assert_array_equal(a @ b.T, matrix)


def test_non_staircase_and_multi_valued_matrices_keep_identity_factors():
    matrix = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    a, b = sparse_factors(matrix)
    np.testing.assert_array_equal(a @ b.T, matrix)
    assert a.shape[1] == 3
    two_values = np.array([[1.0, 0.0], [2.0, 1.0]])
    a, b = sparse_factors(two_values)
    np.testing.assert_array_equal(a @ b.T, two_values)


def test_all_zero_matrix():
    a, b = sparse_factors(np.zeros((2, 3)))
    np.testing.assert_array_equal(a @ b.T, np.zeros((2, 3)))
