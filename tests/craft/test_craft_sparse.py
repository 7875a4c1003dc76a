"""Large Craft blocks built sparse or factored equal the dense construction, entry for entry."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse

from compiler.model.config import SparseLinear
from compiler.passes.qk_factor import sparse_factors
from craft import maps as craft_maps
from craft.bases import BasisDirection, VectorInBasis, VectorSpaceWithBasis
from craft.blocks import MLP
from craft.chamber import categorical_attn, categorical_mlp
from craft.maps import BilinearMap, FactoredBilinearMap, LinearMap, dyadic_prefix_factors
from rasp import rasp


def _space(name: str, values) -> VectorSpaceWithBasis:
    return VectorSpaceWithBasis.from_values(name, values)


@pytest.mark.parametrize("seed", range(4))
def test_dyadic_prefix_factors_cover_every_prefix_exactly(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 70))
    order = rng.permutation(m)
    lengths = rng.integers(0, m + 1, size=int(rng.integers(1, 40)))
    a, b = dyadic_prefix_factors(order, lengths, value=100.0)
    rank = np.empty(m, dtype=int)
    rank[order] = np.arange(m)
    expected = 100.0 * (rank[None, :] < lengths[:, None])
    np.testing.assert_array_equal((a @ b.T).toarray(), expected)
    bound = int(m).bit_length() + 1
    assert max(np.diff(a.indptr), default=0) <= bound and max(np.diff(b.indptr), default=0) <= bound


@pytest.mark.parametrize("name", ["LT", "LEQ", "GT", "GEQ", "EQ"])
@pytest.mark.parametrize("values", [list(range(0, 40, 3)), [f"w{i:02d}" for i in range(17)]], ids=["ints", "strings"])
def test_large_selector_equals_the_dense_table(name, values, monkeypatch):
    queries = _space("q", values + [None])
    keys = _space("k", values[::2] + [values[-1] + values[-1]] if isinstance(values[0], str) else values[::2] + [99])
    predicate = getattr(rasp.Comparison, name)
    dense = categorical_attn.selector_qk(queries, keys, predicate)
    monkeypatch.setattr(craft_maps, "SPARSE_ABOVE", 10)
    large = categorical_attn.selector_qk(queries, keys, predicate)
    assert isinstance(large, FactoredBilinearMap) == (name != "EQ")
    if name == "EQ":
        assert craft_maps.is_sparse(large.matrix)
    np.testing.assert_array_equal(craft_maps.to_dense(large.matrix), dense.matrix)


def test_large_selector_with_a_plain_function_is_stored_sparse(monkeypatch):
    queries, keys = _space("q", range(12)), _space("k", range(12))
    dense = categorical_attn.selector_qk(queries, keys, lambda k, q: (k + q) % 5 == 0)
    monkeypatch.setattr(craft_maps, "SPARSE_ABOVE", 10)
    large = categorical_attn.selector_qk(queries, keys, lambda k, q: (k + q) % 5 == 0)
    assert craft_maps.is_sparse(large.matrix)
    np.testing.assert_array_equal(large.matrix.toarray(), dense.matrix)


def test_large_attention_head_keeps_factors_and_scores_like_the_dense_head(monkeypatch):
    queries = keys = _space("x", range(30))
    one, bos = VectorSpaceWithBasis((BasisDirection("one"),)), VectorSpaceWithBasis((BasisDirection("tokens", "BOS"),))
    value = LinearMap(bos, VectorSpaceWithBasis((BasisDirection("out"),)), np.ones((1, 1)))
    dense = categorical_attn.attention_head(categorical_attn.selector_qk(queries, keys, rasp.Comparison.LT), 1, value, bos, one)
    monkeypatch.setattr(craft_maps, "SPARSE_ABOVE", 10)
    factored = categorical_attn.attention_head(categorical_attn.selector_qk(queries, keys, rasp.Comparison.LT), 1, value, bos, one)
    assert isinstance(factored.w_qk, FactoredBilinearMap)
    aligned = factored.w_qk.on_spaces(dense.w_qk.left_space, dense.w_qk.right_space)
    np.testing.assert_array_equal(aligned.matrix, dense.w_qk.matrix)
    stream_space = VectorSpaceWithBasis(tuple(queries.basis) + one.basis + bos.basis)
    rng = np.random.default_rng(0)
    stream = VectorInBasis(stream_space.basis, rng.random((2, 6, stream_space.num_dims)))
    np.testing.assert_allclose(factored.apply(stream).magnitudes, dense.apply(stream).magnitudes, rtol=1e-12)


def test_sparse_lookup_mlps_equal_the_dense_ones(monkeypatch):
    xs, ys = _space("x", range(9)), _space("y", "abcd")
    one = VectorSpaceWithBasis((BasisDirection("one"),))
    out = _space("z", {(x, y) for x in range(9) for y in "abcd"})
    build = lambda: categorical_mlp.sequence_map_categorical_mlp(xs, ys, out, lambda x, y: (x, y), one, "h")
    single = lambda: categorical_mlp.map_categorical_mlp(xs, _space("w", range(0, 18, 2)), lambda x: 2 * x, one_space=one)
    dense, dense_single = build(), single()
    monkeypatch.setattr(craft_maps, "SPARSE_ABOVE", 10)
    large, large_single = build(), single()
    for got, expected in ((large, dense), (large_single, dense_single)):
        assert craft_maps.is_sparse(got.first.matrix) and craft_maps.is_sparse(got.second.matrix)
        np.testing.assert_array_equal(got.first.matrix.toarray(), expected.first.matrix)
        np.testing.assert_array_equal(got.second.matrix.toarray(), expected.second.matrix)
    merged = MLP.combine_in_parallel([large, dense_single])
    reference = MLP.combine_in_parallel([dense, dense_single])
    np.testing.assert_array_equal(merged.first.matrix.toarray(), reference.first.matrix)
    np.testing.assert_array_equal(merged.second.matrix.toarray(), reference.second.matrix)


def test_sparse_linear_maps_reindex_compose_and_apply_like_dense_ones():
    rng = np.random.default_rng(1)
    a, b, c = _space("a", range(6)), _space("b", range(5)), _space("c", range(4))
    first = (rng.random((6, 5)) < 0.3) * rng.normal(size=(6, 5))
    second = (rng.random((5, 4)) < 0.3) * rng.normal(size=(5, 4))
    dense = LinearMap(a, b, first) @ LinearMap(b, c, second)
    mixed = LinearMap(a, b, sparse.csr_array(first)) @ LinearMap(b, c, second)
    np.testing.assert_allclose(craft_maps.to_dense(mixed.matrix), dense.matrix, rtol=1e-12)
    bigger = _space("a", range(-2, 8))
    moved = LinearMap(a, b, sparse.csr_array(first)).on_spaces(bigger, b)
    np.testing.assert_array_equal(moved.matrix.toarray(), LinearMap(a, b, first).on_spaces(bigger, b).matrix)
    x = VectorInBasis(a.basis, rng.normal(size=(3, 2, 6)))
    np.testing.assert_allclose(mixed.apply(x).magnitudes, dense.apply(x).magnitudes, rtol=1e-12)


def test_factored_bilinear_map_sums_and_reads_entries_like_the_dense_map():
    rng = np.random.default_rng(2)
    q, k = _space("q", range(5)), _space("k", range(7))
    left, right = rng.normal(size=(5, 3)), rng.normal(size=(7, 3))
    factored = FactoredBilinearMap(q, k, sparse.csr_array(left), sparse.csr_array(right))
    extra = BilinearMap(_space("q", range(3, 9)), k, rng.normal(size=(6, 7)))
    total = (factored + extra) * 2.0
    expected = (BilinearMap(q, k, left @ right.T) + extra) * 2.0
    np.testing.assert_allclose(total.on_spaces(expected.left_space, expected.right_space).matrix, expected.matrix, rtol=1e-12)
    direction_q, direction_k = BasisDirection("q", 4), BasisDirection("k", 6)
    assert total.entry(direction_q, direction_k) == pytest.approx(expected.entry(direction_q, direction_k), rel=1e-12)
    with pytest.raises(ValueError, match="widths differ"):
        FactoredBilinearMap(q, k, sparse.csr_array(left), sparse.csr_array(right[:, :2]))


def test_sparse_inputs_give_the_same_stored_weights_as_dense_ones():
    rng = np.random.default_rng(3)
    matrix = (rng.random((40, 30)) < 0.05) * rng.normal(size=(40, 30))
    for dense_input, sparse_input in (
        (SparseLinear.from_matrix(matrix, in_idx=tuple(range(40))), SparseLinear.from_matrix(sparse.csr_array(matrix), in_idx=tuple(range(40)))),
        (SparseLinear.from_matrix(np.ones((3, 3))), SparseLinear.from_matrix(sparse.csr_array(np.ones((3, 3))))),
    ):
        assert dense_input[0] == sparse_input[0]
        np.testing.assert_array_equal(dense_input[1], sparse_input[1])
    a_dense, b_dense = sparse_factors(matrix)
    a_sparse, b_sparse = sparse_factors(sparse.csr_array(matrix))
    np.testing.assert_array_equal(a_sparse.toarray(), a_dense)
    np.testing.assert_array_equal(b_sparse.toarray(), b_dense)


def test_full_matrix_accepts_an_empty_index():
    """A weight that reads or writes no residual coordinate (an empty `in_idx` / `out_idx`)
    embeds as a zero matrix; `np.array(())` is float64, which numpy refuses as an index."""
    reads_nothing = SparseLinear((0, 3), in_idx=(), out_idx=(1, 2, 4))
    assert not reads_nothing.full_matrix(np.zeros((0, 3), np.float32), 5, 6).any()
    writes_nothing = SparseLinear((2, 0), in_idx=(0, 3), out_idx=())
    assert writes_nothing.full_matrix(np.zeros((2, 0), np.float32), 5, 6).shape == (5, 6)
