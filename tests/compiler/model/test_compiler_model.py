"""Structure of compiled models: the paper's figures, labels, None decoding, params, exactness."""

from __future__ import annotations

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support import random_inputs

from compiler import compile_rasp, compile_rasp_to_model
from compiler.model.transformer import CompiledTransformer, build
from rasp import lib, rasp


def _frac_prevs() -> rasp.SOp:
    is_x = rasp.numerical(rasp.Map(lambda t: t == "x", rasp.tokens)).named("is_x")
    return lib.make_frac_prevs(is_x).named("frac_prevs")


def test_frac_prevs_matches_the_paper_figure():
    model = compile_rasp(_frac_prevs(), {"x", "a", "b", "c"}, 5, optimize=False)  # Tracr's layout
    assert model.config.residual_width == 14
    assert model.config.num_layers == 2
    assert model.residual_labels == (
        "frac_prevs", "indices:0", "indices:1", "indices:2", "indices:3", "indices:4", "is_x",
        "one", "tokens:BOS", "tokens:PAD", "tokens:a", "tokens:b", "tokens:c", "tokens:x",
    )
    result = model.apply(["BOS", "x", "a", "c", "x"])
    assert result.decoded[0] == "BOS"
    np.testing.assert_allclose(result.decoded[1:], [1, 1 / 2, 1 / 3, 1 / 2], atol=1e-6)
    # Layer 0 attention is empty, layer 0 MLP writes is_x, layer 1 attention writes frac_prevs.
    stages = dict(zip(model.stage_names, result.residuals))
    assert np.array_equal(stages["layer 0 attn"].values, stages["embed"].values)
    np.testing.assert_array_equal(stages["layer 0 mlp"].column("is_x"), [0, 1, 0, 0, 1])
    np.testing.assert_allclose(stages["layer 1 attn"].column("frac_prevs")[1:], [1, .5, 1 / 3, .5], atol=1e-6)


def test_sort_unique_compiles_to_two_layers():
    model = compile_rasp(lib.make_sort_unique(rasp.tokens, rasp.tokens), {1, 2, 3, 4}, 5)
    assert model.config.num_layers == 2
    assert model.apply(["BOS", 3, 1, 4, 2]).decoded[1:] == [1, 2, 3, 4]


def test_labels_are_stable_across_builds():
    rasp.reset_label_counter()
    first = compile_rasp(lib.make_sort_unique(rasp.tokens, rasp.tokens), {1, 2, 3}, 4)
    rasp.reset_label_counter()
    second = compile_rasp(lib.make_sort_unique(rasp.tokens, rasp.tokens), {1, 2, 3}, 4)
    assert first.residual_labels == second.residual_labels
    for module, values in first.params.items():
        for name, value in values.items():
            np.testing.assert_array_equal(value, second.params[module][name])


def test_empty_selection_decodes_as_none_and_stays_none():
    shifted = lib.shift_by(1, rasp.tokens)  # None at the first position
    program = rasp.Map(lambda t: t * 10, shifted).named("scaled")
    model = compile_rasp(program, {1, 2, 3}, 5)
    assert model.apply(["BOS", 1, 2, 3]).decoded == ["BOS", None, 10, 20]
    assert program([1, 2, 3]) == [None, 10, 20]


def test_numerical_map_on_fractions_is_exact_with_negative_outputs():
    fractions = _frac_prevs()
    program = rasp.numerical(rasp.Map(lambda f: 3 * f * f - 1.5, fractions)).named("curve")
    vocab = ["x", "a"]
    model = compile_rasp(program, set(vocab), 12)
    inputs = random_inputs(vocab, 12, 100, seed=3)
    for tokens, out in zip(inputs, model.apply_batch([["BOS"] + x for x in inputs])):
        np.testing.assert_allclose(out[1:], program(tokens), atol=1e-4)


def test_haiku_init_creates_exactly_the_compiled_params():
    model = compile_rasp(lib.make_hist(), {"a", "b", "c"}, 6)
    weights = {
        module.split("/", 1)[1]: {k: np.asarray(v) for k, v in values.items()}
        for module, values in model.params.items()
    }
    transformed = hk.without_apply_rng(
        hk.transform(lambda ids: CompiledTransformer(model.config, weights)(ids))
    )
    initialised = transformed.init(jax.random.PRNGKey(0), jnp.zeros((1, 3), jnp.int32))
    assert jax.tree_util.tree_structure(initialised) == jax.tree_util.tree_structure(model.params)
    jax.tree_util.tree_map(np.testing.assert_array_equal, initialised, model.params)


def test_total_parameters_within_twice_the_nonzero_ones():
    model = compile_rasp(lib.make_sort_freq(10), set(range(10)), 10)
    leaves = jax.tree_util.tree_leaves(model.params)
    total = sum(leaf.size for leaf in leaves)
    nonzero = sum(int(np.count_nonzero(leaf)) for leaf in leaves)
    assert total <= 2 * nonzero, (total, nonzero)


def test_projection_identity_reproduces_the_model():
    model = compile_rasp(_frac_prevs(), {"x", "a", "b"}, 6)
    ids = model.input_encoder.encode_batch([["BOS", "x", "a", "x"], ["BOS", "b"]])
    plain = model.forward(model.params, ids)
    projected = model.forward(model.params, ids, jnp.eye(model.config.residual_width))
    np.testing.assert_allclose(projected.output, plain.output, atol=1e-6)
    for a, b in zip(projected.residuals, plain.residuals):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_padding_does_not_change_outputs():
    model = compile_rasp(lib.make_hist(), {"a", "b"}, 6)
    alone = model.apply(["BOS", "a", "b", "a"]).decoded
    batched = model.apply_batch([["BOS", "a", "b", "a"], ["BOS", "a", "a", "a", "b", "b"]])
    assert batched[0] == alone == ["BOS", 2, 1, 2]


def test_attention_patterns_are_returned_per_head():
    model = compile_rasp(lib.make_reverse(rasp.tokens), {1, 2, 3}, 4)
    result = model.apply(["BOS", 1, 2, 3])
    assert len(result.attention) == model.config.num_layers
    last = result.attention[-1]  # the reverse head: position i reads position n + 1 - i
    assert last.shape[-2:] == (4, 4)
    np.testing.assert_allclose(last[0, 1:, 1:], np.fliplr(np.eye(3)), atol=1e-6)


def test_tracr_entry_point_uses_tracr_special_tokens():
    model = compile_rasp_to_model(lib.make_length(), {1, 2}, 3)
    assert model.apply(["compiler_bos", 1, 2]).decoded == ["compiler_bos", 2, 2]


def test_forward_runs_under_jit_with_explicit_float32_precision():
    model = compile_rasp(lib.make_sort(rasp.tokens, rasp.tokens, max_seq_len=6, min_key=1), {1, 2, 3}, 6)
    params, forward, _ = build(model.config, {
        module.split("/", 1)[1]: {k: np.asarray(v) for k, v in values.items()}
        for module, values in model.params.items()
    })
    ids = model.input_encoder.encode_batch([["BOS", 3, 1, 2, 2]])
    np.testing.assert_array_equal(forward(params, ids).output, model.run(ids).output)


@pytest.mark.parametrize("causal", [False, True])
def test_causal_flag_masks_future_keys(causal):
    select = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ)
    program = rasp.numerical(
        rasp.Aggregate(select, rasp.numerical(rasp.Map(lambda t: t, rasp.tokens)), default=0)
    )
    model = compile_rasp(program, {0, 1}, 5, causal=causal)
    pattern = model.apply(["BOS", 1, 0, 1]).attention[-1][0]
    assert np.allclose(np.triu(pattern, 1), 0)  # LEQ never reads ahead, causal or not
