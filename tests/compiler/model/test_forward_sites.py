"""The one forward pass's sites: captures, hooks, and starting or stopping at a snapshot, with
and without a projection. Tolerance: 1e-5 absolute (float32 sums taken in another order)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from compiler import compile_rasp
from compiler.errors import CompilerError
from compiler.model.weights import head_weights
from rasp import lib, rasp

ATOL = 1e-5


@pytest.fixture(scope="module")
def model():
    return compile_rasp(lib.make_sort_unique(rasp.tokens, rasp.tokens), {1, 2, 3, 4}, 4)


@pytest.fixture(scope="module")
def ids(model):
    return jnp.asarray(model.input_encoder.encode_batch([["BOS", 3, 1, 4, 2], ["BOS", 2, 4, 1, 3]]))


def _projections(model):
    """No projection, and a random one to a narrower stream (it need not keep the model exact)."""
    width = model.config.residual_width
    w = np.random.default_rng(0).standard_normal((width, width - 3)) / np.sqrt(width)
    return (None, jnp.asarray(w, jnp.float32))


def test_a_captured_snapshot_is_the_stream_the_model_keeps_and_the_residual_it_reports(model, ids):
    count = len(model.config.layers)
    for w in _projections(model):
        names = tuple(f"resid.{k}" for k in range(count + 1))
        out = model.forward(model.params, ids, projection=w, capture=names)
        for k, name in enumerate(names):
            stream = out.cache[name]
            width = model.config.residual_width if w is None else w.shape[1]
            assert stream.shape[-1] == width
            decompressed = stream if w is None else stream @ w.T
            np.testing.assert_allclose(decompressed, out.residuals[k], atol=ATOL)


def test_starting_at_a_snapshot_from_its_stream_gives_the_whole_pass(model, ids):
    for w in _projections(model):
        whole = model.forward(model.params, ids, projection=w, capture=("resid.2",))
        resumed = model.forward(model.params, ids, projection=w, start=2, stream=whole.cache["resid.2"])
        np.testing.assert_allclose(resumed.output, whole.output, atol=ATOL)
        stopped = model.forward(model.params, ids, projection=w, stop=2, capture=("resid.2",))
        assert stopped.output is None
        np.testing.assert_allclose(stopped.cache["resid.2"], whole.cache["resid.2"], atol=ATOL)


def test_a_hook_replaces_a_sites_value(model, ids):
    """Zeroing what MLP sub-layer 1 adds leaves snapshot 2 equal to snapshot 1; an identity hook
    changes nothing."""
    whole = model.forward(model.params, ids, capture=("resid.1",))
    zeroed = model.forward(model.params, ids, hooks=(("layer_1.delta", jnp.zeros_like),), capture=("resid.2",))
    np.testing.assert_array_equal(zeroed.cache["resid.2"], whole.cache["resid.1"])
    same = model.forward(model.params, ids, hooks=(("resid.3", lambda r: r),))
    np.testing.assert_array_equal(same.output, model.forward(model.params, ids).output)


def test_heads_mixed_values_times_their_output_weights_are_the_attention_delta(model, ids):
    layer = next(i for i, spec in enumerate(model.config.layers) if getattr(spec, "heads", ()))
    heads = len(model.config.layers[layer].heads)
    names = tuple(f"layer_{layer}.head_{h}.z" for h in range(heads)) + (f"layer_{layer}.delta",)
    out = model.forward(model.params, ids, capture=names)
    total = sum(np.asarray(out.cache[names[h]]) @ head_weights(model, layer, h).w_o for h in range(heads))
    np.testing.assert_allclose(total, out.cache[f"layer_{layer}.delta"], atol=ATOL)


def test_bad_starts_and_tied_blocks_are_refused(model, ids):
    with pytest.raises(CompilerError, match="needs the stream there"):
        model.forward(model.params, ids, start=1)
    with pytest.raises(CompilerError, match="0 <= start <= stop"):
        model.forward(model.params, ids, stop=len(model.config.layers) + 1)
    loop = compile_rasp(lib.make_parity_loop(3), {0, 1}, 4)
    with pytest.raises(CompilerError, match="untie it first"):
        loop.forward(loop.params, jnp.asarray(loop.input_encoder.encode_batch([["BOS", 1, 0]])), capture=("resid.1",))


def test_rows_that_w_drops_entirely_read_zero_and_write_nothing():
    """A fixed W whose rows for a sub-layer are all zero has no blocks there (an empty tuple, not
    None): the pass reads zeros and adds nothing, as the dense product would."""
    from compiler.model import projected

    stream, y = jnp.ones((2, 3, 4)), jnp.ones((2, 3, 2))
    w = jnp.zeros((5, 4))
    blocks = {(1, 3): projected.projection_blocks(np.zeros((5, 4)), (1, 3))}
    assert blocks[(1, 3)] == ()
    np.testing.assert_array_equal(projected.read_rows(stream, w, (1, 3), blocks), np.zeros((2, 3, 2)))
    np.testing.assert_array_equal(projected.add_rows(stream, y, w, (1, 3), blocks), stream)
