"""`craft.numerics`: the one numpy softmax every numpy forward pass uses, and the Gram matrix."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from support import REPO

from craft.numerics import gram, softmax


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


def test_gram_is_the_matrix_of_inner_products_in_float64():
    rows = np.random.default_rng(0).standard_normal((7, 3)).astype(np.float32)
    product = gram(rows)
    assert product.dtype == np.float64
    np.testing.assert_allclose(product, rows.astype(np.float64) @ rows.astype(np.float64).T, rtol=1e-12)
    np.testing.assert_array_equal(product, product.T)


@pytest.mark.slow  # 2.2 GB, a few seconds
def test_gram_of_a_16k_by_768_matrix_does_not_crash():
    """``w @ w.T`` of this float64 size ends the process in OpenBLAS 0.3.31's threaded syrk on a
    2-core machine (segmentation fault); run in a child process so a crash fails only this test."""
    code = ("import numpy as np; from craft.numerics import gram; "
            "w = np.random.default_rng(0).random((16740, 768)); g = gram(w); "
            "print(g.shape, abs(g[0, 0] - w[0] @ w[0]) < 1e-9)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=REPO,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "2"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["(16740,", "16740)", "True"]
