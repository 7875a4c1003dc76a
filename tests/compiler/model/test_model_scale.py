"""The forward pass at scale: sparse weights applied exactly, and jit cost paid up front."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from compiler import compile_rasp
from compiler.examples import EXAMPLES
from compiler.model.config import SparseLinear
from compiler.model.transformer import apply_linear


def _random_sparse(rng: np.random.Generator, shape: tuple[int, int], count: int) -> np.ndarray:
    matrix = np.zeros(shape, dtype=np.float32)
    flat = rng.choice(shape[0] * shape[1], size=count, replace=False)
    matrix.reshape(-1)[flat] = rng.normal(size=count).astype(np.float32)
    return matrix


@pytest.mark.parametrize(
    "count, expected_storage",
    [(6, "matmul"), (350, "gather"), (700, "dense")],
)
def test_sparse_linear_equals_the_dense_product_in_every_storage(count, expected_storage):
    rng = np.random.default_rng(count)
    matrix = _random_sparse(rng, (30, 40), count)
    in_idx, out_idx = tuple(range(5, 35)), tuple(range(0, 80, 2))
    spec, param = SparseLinear.from_matrix(matrix, in_idx=in_idx, out_idx=out_idx)
    storage = "dense" if not spec.is_sparse else ("gather" if spec.column_wise or spec.row_wise else "matmul")
    assert storage == expected_storage
    x = rng.normal(size=(3, 4, 50)).astype(np.float32)
    got = np.asarray(apply_linear(spec, jnp.asarray(param), jnp.asarray(x), 80))
    expected = x @ spec.full_matrix(param, 50, 80)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)  # float32 sums of 30 terms


def test_sparse_storage_needs_fewer_than_a_third_non_zeros():
    # A sparse entry stores value, row and column: at 40% non-zeros dense storage is smaller.
    matrix = _random_sparse(np.random.default_rng(0), (10, 10), 40)
    spec, param = SparseLinear.from_matrix(matrix)
    assert not spec.is_sparse and param.shape == (10, 10)


def test_warmup_compiles_the_shape_that_later_calls_reuse():
    example = EXAMPLES["sort"]
    model = compile_rasp(example.build(5), example.vocab, 5)
    seconds = model.warmup(batch_size=3)
    assert seconds > 0
    cached = model.forward._cache_size()
    batch = [["BOS", 1, 2, 3, 4, 2], ["BOS", 4], ["BOS", 2, 2, 1, 3, 4]]
    assert model.apply_batch(batch) == [["BOS", 1, 2, 2, 3, 4], ["BOS", 4], ["BOS", 1, 2, 2, 3, 4]]
    assert model.forward._cache_size() == cached


@pytest.mark.parametrize("kwargs", [{"batch_size": 0}, {"batch_size": 2.0}, {"seq_len": 6}, {"seq_len": -1}])
def test_warmup_rejects_impossible_shapes(kwargs):
    example = EXAMPLES["reverse"]
    model = compile_rasp(example.build(5), example.vocab, 5)
    with pytest.raises(ValueError, match="warmup"):
        model.warmup(**kwargs)


@pytest.mark.parametrize("per_column", [1, 3, 12])  # 12 > UNROLL_STEPS: the fori_loop path
def test_column_wise_application_of_lookup_tables(per_column):
    rng = np.random.default_rng(per_column)
    rows, cols = 60, 40
    matrix = np.zeros((rows, cols), dtype=np.float32)
    for col in range(cols):
        matrix[rng.choice(rows, per_column, replace=False), col] = rng.normal(size=per_column)
    spec, param = SparseLinear.from_matrix(matrix)
    assert spec.is_sparse and spec.column_wise
    x = rng.normal(size=(2, 5, rows)).astype(np.float32)
    got = np.asarray(apply_linear(spec, jnp.asarray(param), jnp.asarray(x)))
    np.testing.assert_allclose(got, x @ matrix, rtol=1e-5, atol=1e-5)  # float32 sums


def test_row_wise_application_of_a_dyadic_key_matrix():
    # Each row has few non-zeros but some columns are long (a dyadic cover's big blocks).
    rows, cols = 64, 20
    matrix = np.zeros((rows, cols), dtype=np.float32)
    matrix[:, 0] = 1.0
    matrix[np.arange(rows), 1 + np.arange(rows) % (cols - 1)] = 2.0
    spec, param = SparseLinear.from_matrix(matrix)
    assert spec.is_sparse and not spec.column_wise and spec.row_wise
    x = np.random.default_rng(0).normal(size=(3, rows)).astype(np.float32)
    got = np.asarray(apply_linear(spec, jnp.asarray(param), jnp.asarray(x)))
    np.testing.assert_allclose(got, x @ matrix, rtol=1e-5, atol=1e-4)  # float32 sums of 64 terms


def test_outputs_written_to_repeated_coordinates_add_up():
    matrix = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    spec, param = SparseLinear.from_matrix(matrix, out_idx=(4, 1, 4))
    x = np.array([[1.0, 2.0]], dtype=np.float32)
    got = np.asarray(apply_linear(spec, jnp.asarray(param), jnp.asarray(x), 6))
    np.testing.assert_array_equal(got, [[0.0, 12.0, 0.0, 0.0, 9.0 + 15.0, 0.0]])


def test_outputs_only_returns_the_same_output_and_keeps_no_snapshots():
    example = EXAMPLES["sort"]
    model = compile_rasp(example.build(6), example.vocab, 6)
    batch = [["BOS", 4, 1, 3, 1, 2, 2], ["BOS", 2, 4], ["BOS", 3, 3, 1]]
    ids = model.input_encoder.encode_batch(batch)
    full = model.run(ids)
    lean = model.run(ids, outputs_only=True)
    np.testing.assert_array_equal(np.asarray(lean.output), np.asarray(full.output))
    assert lean.residuals == lean.attention == lean.written == lean.hidden == ()
    assert len(full.residuals) == 1 + len(model.config.layers)
    # XLA's account: the lean executable returns only the logits, batch x T x outputs floats.
    padded = np.asarray(model.input_encoder.encode_batch([row + [4] * (7 - len(row)) for row in batch]))
    outputs = {
        flag: model.forward.lower(model.params, padded, outputs_only=flag).compile().memory_analysis().output_size_in_bytes
        for flag in (False, True)
    }
    assert outputs[True] == 4 * padded.shape[0] * padded.shape[1] * np.asarray(full.output).shape[-1]
    assert outputs[False] > 4 * outputs[True]
    # A lean executable warmed up ahead of time serves apply_batch without another trace.
    model.warmup(batch_size=3, outputs_only=True)
    cached = model.forward._cache_size()
    assert model.apply_batch(batch) == [["BOS", 1, 1, 2, 2, 3, 4], ["BOS", 2, 4], ["BOS", 1, 3, 3]]
    assert model.forward._cache_size() == cached
