"""`craft.numerics.softmax`: the one numpy softmax every numpy forward pass uses."""

from __future__ import annotations

import numpy as np

from craft.numerics import softmax


def test_rows_sum_to_one_and_follow_the_logits():
    weights = softmax(np.array([[0.0, np.log(3.0)], [1.0, 1.0]]))
    np.testing.assert_allclose(weights, [[0.25, 0.75], [0.5, 0.5]], rtol=1e-12)  # float64


def test_large_logits_do_not_overflow():
    weights = softmax(np.array([1000.0, 1000.0, -1000.0], dtype=np.float32))
    assert weights.dtype == np.float32
    np.testing.assert_array_equal(weights, np.array([0.5, 0.5, 0.0], dtype=np.float32))


def test_masked_entries_get_exactly_zero_weight():
    logits = np.array([[5.0, 1.0, 1.0], [2.0, 9.0, 2.0]])
    where = np.array([[False, True, True], [True, False, True]])
    weights = softmax(logits, where=where)
    np.testing.assert_array_equal(weights, [[0.0, 0.5, 0.5], [0.5, 0.0, 0.5]])


def test_other_axes_and_integer_logits():
    weights = softmax(np.array([[0, 0], [0, 0], [0, 0], [0, 0]]), axis=0)
    assert weights.dtype == np.float64
    np.testing.assert_array_equal(weights, np.full((4, 2), 0.25))
