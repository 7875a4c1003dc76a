"""Pre-norm models (`compile_rasp(..., norm=...)`): exact against RASP, and the norm held constant.

The library programs compiled with a LayerNorm (or RMSNorm) before every sub-layer and the
unembedding equal the RASP evaluator on random inputs (categorical outputs exactly, numbers
within the agree rule's 1e-3); at every snapshot of every checked input the norm's divisor is
within the stated spread of its gain (float32 adds at most 1e-6 relative), and every weight that
reads a LayerNorm's output ignores the stream's mean. Larger sizes (10/10, 25/25) are `slow`.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from support import compare_with_evaluator, random_inputs

from compiler import CompilerError, InvalidInputError, compile_rasp, load_model, save_model
from compiler.errors import CausalSemanticsWarning
from compiler.examples import CATALOGUE
from compiler.fuzzing.differential import assert_exact
from compiler.model import oracle
from compiler.model.norm import ANCHOR, COUNTER, NORM_SPREAD, ZERO, norm_spec, read_factor
from rasp import lib, rasp

INPUTS = 100
FLOAT_RELATIVE = 1e-6  # float32's share of a divisor's measured distance from its gain


def _compiled(example, size: int, norm: str, causal: bool = False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalSemanticsWarning)
        return compile_rasp(example.build(size), example.scaled_vocab(size), size, norm=norm, causal=causal)


def _check(example, size: int, norm: str, causal: bool = False, inputs: int = INPUTS, constant: bool = False) -> None:
    """The model equals RASP on random inputs; with `constant`, its norm is constant on them."""
    model = _compiled(example, size, norm, causal)
    assert model.config.norm is not None and model.config.norm.kind == norm
    tokens = random_inputs(example.scaled_vocab(size), size, inputs, seed=size)
    compared = compare_with_evaluator(model, example.build(size), tokens, causal, f"{example.name} {norm}")
    assert compared >= inputs * 0.9
    if constant:
        _check_norm_is_constant(model, tokens)


def _check_norm_is_constant(model, tokens) -> None:
    """At every snapshot and real position the norm reads a divisor within the spread of its gain."""
    norm = model.config.norm
    ids = model.input_encoder.encode_batch([["BOS", *xs] for xs in tokens])
    real = ids != model.config.pad_id
    for snapshot in model.forward(model.params, ids).residuals:
        assert np.abs(read_factor(norm, np.asarray(snapshot)[real]) - 1).max() <= norm.spread + FLOAT_RELATIVE


@pytest.mark.parametrize("example", CATALOGUE.values(), ids=lambda e: e.name)
def test_every_library_program_with_layernorm_matches_rasp(example):
    _check(example, 5, "layernorm")


@pytest.mark.parametrize("name", ["sort", "count_so_far", "parity_loop"])
def test_rmsnorm_and_causal_layernorm_match_rasp(name):
    _check(CATALOGUE[name], 5, "rmsnorm")
    _check(CATALOGUE[name], 5, "layernorm", causal=True)


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
@pytest.mark.parametrize("name", ["count_so_far", "shuffle_dyck2", "sort_freq"])
def test_the_divisor_stays_within_the_spread_of_the_gain(name, norm):
    """Numbers (a mean of a count), many s-ops and many blocks: the measured divisor at every snapshot is within `spread` of the gain (plus float32's share)."""
    _check(CATALOGUE[name], 5, norm, inputs=60, constant=True)


@pytest.mark.slow
@pytest.mark.parametrize("size", [10, 25])
@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
@pytest.mark.parametrize("example", CATALOGUE.values(), ids=lambda e: e.name)
def test_every_library_program_with_a_norm_at_larger_sizes(example, norm, size):
    _check(example, size, norm, causal=False, inputs=60, constant=True)
    _check(example, size, norm, causal=True, inputs=60)


def test_the_norm_coordinates_are_written_as_documented():
    """The anchor pair (+A, -A) and the zero coordinate at every position; every reader's rows
    (query, key, value, MLP input, unembedding) sum to zero, so a shift of the stream by a
    multiple of the all-ones vector (LayerNorm's centring, and its rounding) changes no read."""
    from compiler.model.weights import head_weights, mlp_weights, unembedding

    model = compile_rasp(lib.make_hist(), {"a", "b", "c"}, 4, norm="layernorm")
    labels = model.residual_labels
    assert labels[-3:] == (ANCHOR, COUNTER, ZERO)
    assert [str(d) for d in model.residual_space.basis] == list(labels)
    out = model.apply(["BOS", "a", "b", "a"])
    anchor = model.config.norm.anchor
    for residual in out.residuals:
        np.testing.assert_allclose(residual.column(ANCHOR), anchor)
        np.testing.assert_allclose(residual.column(COUNTER), -anchor)
        np.testing.assert_array_equal(residual.column(ZERO), 0.0)
    readers = [unembedding(model)]
    for index, layer in enumerate(model.config.layers):
        if hasattr(layer, "heads"):
            for h in range(len(layer.heads)):
                weights = head_weights(model, index, h)
                readers += [weights.w_q, weights.w_k, weights.w_v]
        elif layer.w_in.shape[1]:
            readers.append(mlp_weights(model, index).w_in)
    for matrix in readers:
        np.testing.assert_allclose(matrix.sum(axis=0), 0.0, atol=1e-5)
    rms = compile_rasp(lib.make_hist(), {"a", "b", "c"}, 4, norm="rmsnorm")
    assert rms.residual_labels[-1:] == (ANCHOR,) and rms.config.residual_width == len(labels) - 2


def test_the_spread_is_the_divisors_worst_distance_from_the_gain():
    """`norm_spec` sizes the anchor for NORM_SPREAD; the spread it states is the divisor's
    relative distance from the gain at the two ends of the budget's range, the worse one."""
    spec = norm_spec("layernorm", 40, 250.0)
    assert spec.spread <= NORM_SPREAD
    width = 43
    for rest in (0.0, 250.0):
        divisor = np.sqrt((2 * spec.anchor**2 + rest) / width + spec.eps)
        assert abs(spec.scale / divisor - 1) <= spec.spread * (1 + 1e-9)
    worst = max(abs(spec.scale / np.sqrt((2 * spec.anchor**2 + r) / width + spec.eps) - 1) for r in (0.0, 250.0))
    assert worst == pytest.approx(spec.spread, rel=1e-9)
    assert norm_spec("rmsnorm", 40, 0.0).anchor == 1.0  # nothing varies: the smallest anchor


def test_the_oracle_and_a_saved_model_run_the_norm():
    model = compile_rasp(lib.make_frac_prevs(rasp.tokens == "x"), {"x", "a", "b"}, 5, norm="layernorm")
    ids = model.input_encoder.encode_batch([["BOS", "x", "a", "x"], ["BOS", "b", "b", "x", "a", "x"]])
    jax_out = np.asarray(model.forward(model.params, ids).output)
    np.testing.assert_allclose(oracle.forward(model.config, model.params, ids), jax_out, atol=1e-5)
    np.testing.assert_allclose(oracle.forward(model.config, model.params, ids, np.float64), jax_out, atol=1e-5)


def test_a_model_file_keeps_the_norm(tmp_path):
    model = compile_rasp(lib.make_sort_unique(rasp.tokens, rasp.tokens), {1, 2, 3, 4}, 4, norm="rmsnorm")
    path = save_model(model, tmp_path / "sort.safetensors")
    loaded = load_model(path)
    assert loaded.config.norm == model.config.norm
    ids = model.input_encoder.encode_batch([["BOS", 3, 1, 4, 2], ["BOS", 2, 1]])
    np.testing.assert_array_equal(np.asarray(loaded.forward(loaded.params, ids).output),
                                  np.asarray(model.forward(model.params, ids).output))
    from compiler.io.files import read_model_file

    assert read_model_file(path).format_version == 4


def test_bad_norms_are_refused_before_compiling():
    program = lib.make_length()
    with pytest.raises(InvalidInputError, match="norm must be None or one of"):
        compile_rasp(program, {1, 2}, 3, norm="batchnorm")
    with pytest.raises(InvalidInputError, match="norm and reuse_residual"):
        compile_rasp(program, {1, 2}, 3, norm="layernorm", reuse_residual=True)
    model = compile_rasp(program, {1, 2}, 3, norm="layernorm")
    ids = model.input_encoder.encode_batch([["BOS", 1, 2]])
    with pytest.raises(CompilerError, match="residual projection"):
        model.forward(model.params, ids, projection=np.eye(model.config.residual_width, dtype=np.float32))


def test_a_program_labelled_like_a_norm_coordinate_is_refused():
    program = rasp.numerical(rasp.Map(lambda x: 1 if x == "a" else 0, rasp.tokens)).named(ANCHOR)
    with pytest.raises(CompilerError, match="rename it"):
        compile_rasp(program, {"a", "b"}, 3, norm="rmsnorm")


def test_fuzz_shapes_compile_exactly_with_a_norm():
    """Shapes the fuzzer builds (a numerical mean read by a lookup, a sum) with both norms."""
    frac = rasp.numerical(rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ),
                                         rasp.numerical(rasp.Map(lambda t: 1 if t == 2 else 0, rasp.tokens)),
                                         default=0))
    program = rasp.Map(lambda f: round(f, 1), frac)
    for norm in ("layernorm", "rmsnorm"):
        assert_exact(program, vocab=[1, 2, 3], max_seq_len=4, norm=norm)
        assert_exact(program, vocab=[1, 2, 3], max_seq_len=4, causal=True, norm=norm)
