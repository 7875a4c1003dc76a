"""Selector width decodes every width 0..max_seq_len exactly (64, and 200 as a spot check), in
float64 and with float32 weights/activations, categorical and numerical, BOS-zeroed and clean."""

import numpy as np
import pytest
from support import BOS_SPACE, ONE_SPACE, decode_categorical, stream

from craft.bases import BasisDirection, VectorSpaceWithBasis
from craft.blocks import SeriesWithResiduals
from craft.chamber.categorical_attn import selector_qk
from craft.chamber.selector_width import scratch_direction, selector_width


def _setup(n, pred, categorical, causal=False):
    idx = VectorSpaceWithBasis.from_values("indices", range(n))
    out_space = (VectorSpaceWithBasis.from_values("w", range(n + 1)) if categorical
                 else VectorSpaceWithBasis((BasisDirection("w"),)))
    head, mlp = selector_width(selector_qk(idx, idx, pred), 1, out_space, n, BOS_SPACE, ONE_SPACE,
                               categorical, causal=causal)
    x = stream(idx, [{BasisDirection("indices", i): 1.0} for i in range(n)])
    return head, mlp, x


def _widths(out, categorical):
    if categorical:
        return decode_categorical(out, "w")
    return out.magnitude(BasisDirection("w")).tolist()


@pytest.mark.parametrize("categorical", [True, False])
@pytest.mark.parametrize("n", [1, 2, 7, 64])
def test_all_widths_exact(categorical, n):
    # key < query gives widths 0..n-1; key <= query gives 1..n: together every width 0..n.
    seen = set()
    for pred in (lambda k, q: k < q, lambda k, q: k <= q):
        head, mlp, x = _setup(n, pred, categorical)
        out = SeriesWithResiduals([head, mlp]).apply(x)
        expected = [sum(pred(k, q) for k in range(n)) for q in range(n)]
        got = _widths(out, categorical)
        if categorical:
            assert got == [None] + expected
        else:
            np.testing.assert_allclose(got, [0.0] + expected, atol=1e-9)
        assert np.all(out.magnitude(scratch_direction("w_hidden")) == 0.0)  # cleaned everywhere
        seen.update(expected)
    assert seen == set(range(n + 1))


def test_causal_width():
    n = 64
    head, mlp, x = _setup(n, lambda k, q: (k + q) % 3 == 0, True, causal=True)
    out = SeriesWithResiduals([head, mlp]).apply(x)
    expected = [sum((k + q) % 3 == 0 for k in range(q + 1)) for q in range(n)]
    assert decode_categorical(out, "w") == [None] + expected


def _float32_run(head, mlp, x):
    """The two blocks evaluated with float32 weights and activations, as in a compiled model."""
    f32 = np.float32
    space = SeriesWithResiduals([head, mlp]).input_space
    res = x.project(space).magnitudes.astype(f32)
    q = res @ head.w_qk.on_spaces(space, space).matrix.astype(f32)
    scores = q @ res.T
    w = np.exp(scores - scores.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    res = res + w @ (res @ head.w_ov.on_spaces(space, space).matrix.astype(f32))
    hidden = np.maximum(res @ mlp.first.on_spaces(space, mlp.hidden_space).matrix.astype(f32), 0)
    res = res + hidden @ mlp.second.on_spaces(mlp.hidden_space, space).matrix.astype(f32)
    return x.__class__(space.basis, res.astype(np.float64))


@pytest.mark.parametrize("n", [64, 200])
def test_long_sequences_float32(n):
    head, mlp, x = _setup(n, lambda k, q: k <= q, True)
    out = _float32_run(head, mlp, x)
    assert decode_categorical(out, "w", tol=1e-3) == [None] + [q + 1 for q in range(n)]
    head, mlp, x = _setup(n, lambda k, q: k < q, False)
    out = _float32_run(head, mlp, x)
    np.testing.assert_allclose(out.magnitude(BasisDirection("w")), [0.0] + list(range(n)), atol=1e-3)
