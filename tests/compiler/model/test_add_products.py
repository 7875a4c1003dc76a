"""`add_products`: an attention layer's head outputs summed in one pass equal the head-by-head sum."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from compiler.model.config import SparseLinear
from compiler.model.projected import placed
from compiler.model.transformer import add_linear, add_products


def _parts(targets: list[tuple[int, ...]], seed: int = 0):
    rng = np.random.default_rng(seed)
    parts = []
    for out_idx in targets:
        spec, param = SparseLinear.from_matrix(rng.standard_normal((3, len(out_idx))), out_idx=out_idx)
        parts.append((spec, jnp.asarray(param), jnp.asarray(rng.standard_normal((2, 5, 3)), jnp.float32)))
    return parts


@pytest.mark.parametrize("targets", [
    [(0, 1, 2), (3, 4), (7, 8, 9)],  # in order, with a gap
    [(7, 8, 9), (0, 1, 2), (5, 3)],  # out of order, one head's columns reversed
    [(1, 2), (2, 3)],  # overlapping: added one by one
    [(4,)],  # one head
])
def test_heads_summed_in_one_pass_equal_the_sum_head_by_head(targets):
    stream = jnp.asarray(np.random.default_rng(1).standard_normal((2, 5, 11)), jnp.float32)
    parts = _parts(targets)
    expected = stream
    for spec, param, x in parts:
        expected = add_linear(expected, spec, param, x)
    np.testing.assert_array_equal(np.asarray(add_products(stream, parts)), np.asarray(expected))  # bit for bit


def test_placed_puts_columns_at_their_coordinates_and_zeros_elsewhere():
    y = jnp.asarray([[1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(np.asarray(placed(y, np.array([4, 0, 1]), 6)), [[2.0, 3.0, 0.0, 0.0, 1.0, 0.0]])
    np.testing.assert_array_equal(np.asarray(placed(y, np.array([0, 1, 2]), 3)), [[1.0, 2.0, 3.0]])
