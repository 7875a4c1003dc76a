"""Blocks: MLP activations, attention semantics, merging, residual series."""

import numpy as np
import pytest

from craft.bases import BasisDirection, VectorInBasis, VectorSpaceWithBasis
from craft.blocks import MLP, AttentionHead, MultiAttentionHead, SeriesWithResiduals, combine_in_parallel
from craft.maps import BilinearMap, LinearMap

RNG = np.random.default_rng(0)
X = VectorSpaceWithBasis.from_names(["x1", "x2", "x3"])
Y = VectorSpaceWithBasis.from_names(["y1", "y2"])


def _hidden(name, n):
    return VectorSpaceWithBasis(tuple(BasisDirection(name, i) for i in range(n)))


@pytest.mark.parametrize(
    "activation,fn",
    [("relu", lambda h: np.maximum(h, 0)), ("square", lambda h: h**2), ("identity", lambda h: h)],
)
def test_mlp_elementwise(activation, fn):
    w1, w2 = RNG.normal(size=(3, 5)), RNG.normal(size=(5, 2))
    mlp = MLP(LinearMap(X, _hidden("h", 5), w1), LinearMap(_hidden("h", 5), Y, w2), activation)
    x = RNG.normal(size=(4, 3))
    out = mlp.apply(VectorInBasis(X.basis, x))
    np.testing.assert_allclose(out.magnitudes, fn(x @ w1) @ w2)
    assert mlp.input_space == X and mlp.output_space == Y


def test_mlp_bilinear_and_merge():
    h = _hidden("g", 6)
    w1, w2 = RNG.normal(size=(3, 6)), RNG.normal(size=(3, 2))
    mlp = MLP(LinearMap(X, h, w1), LinearMap(_hidden("g", 3), Y, w2), "bilinear")
    x = RNG.normal(size=(4, 3))
    pre = x @ w1
    np.testing.assert_allclose(mlp.apply(VectorInBasis(X.basis, x)).magnitudes, (pre[:, :3] * pre[:, 3:]) @ w2)
    with pytest.raises(ValueError, match="first half"):
        MLP(LinearMap(X, h, w1), LinearMap(h, Y, RNG.normal(size=(6, 2))), "bilinear")
    other = MLP(
        LinearMap(X, _hidden("k", 4), RNG.normal(size=(3, 4))),
        LinearMap(_hidden("k", 2), Y, RNG.normal(size=(2, 2))),
        "bilinear",
    )
    merged = combine_in_parallel([mlp, other])
    v = VectorInBasis(X.basis, x)
    np.testing.assert_allclose(merged.apply(v).magnitudes, mlp.apply(v).magnitudes + other.apply(v).magnitudes)


def test_mlp_merge_relu_and_disjoint_hidden():
    a = MLP(LinearMap(X, _hidden("a", 2), RNG.normal(size=(3, 2))), LinearMap(_hidden("a", 2), Y, RNG.normal(size=(2, 2))))
    b = MLP(LinearMap(Y, _hidden("b", 3), RNG.normal(size=(2, 3))), LinearMap(_hidden("b", 3), X, RNG.normal(size=(3, 3))))
    merged = MLP.combine_in_parallel([a, b])
    space = VectorSpaceWithBasis(X.basis + Y.basis)
    v = VectorInBasis(space.basis, RNG.normal(size=(5, 5)))
    expected = VectorInBasis.sum([a.apply(v), b.apply(v)])
    assert merged.apply(v).allclose(expected)
    with pytest.raises(ValueError, match="overlap"):
        MLP.combine_in_parallel([a, a])


def _ref_attention(x, qk, ov, causal):
    scores = x @ qk @ x.T
    if causal:
        scores = np.where(np.triu(np.ones_like(scores, dtype=bool), 1), -np.inf, scores)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    return w @ (x @ ov)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_head_semantics_batched(causal):
    qk, ov = RNG.normal(size=(3, 3)), RNG.normal(size=(3, 2))
    head = AttentionHead(BilinearMap(X, X, qk), LinearMap(X, Y, ov), causal=causal)
    x = RNG.normal(size=(2, 6, 3))
    out = head.apply(VectorInBasis(X.basis, x)).magnitudes
    for b in range(2):
        np.testing.assert_allclose(out[b], _ref_attention(x[b], qk, ov, causal), atol=1e-12)


def test_attention_factors_checked():
    wq, wk = RNG.normal(size=(3, 2)), RNG.normal(size=(3, 2))
    wv, wo = RNG.normal(size=(3, 1)), RNG.normal(size=(1, 2))
    head = AttentionHead(BilinearMap(X, X, wq @ wk.T), LinearMap(X, Y, wv @ wo), w_q=wq, w_k=wk, w_v=wv, w_o=wo)
    assert head.w_q.shape == (3, 2)
    with pytest.raises(ValueError, match="multiply"):
        AttentionHead(BilinearMap(X, X, wq @ wk.T + 1), LinearMap(X, Y, wv @ wo), w_q=wq, w_k=wk)
    with pytest.raises(ValueError, match="both"):
        AttentionHead(BilinearMap(X, X, wq @ wk.T), LinearMap(X, Y, wv @ wo), w_q=wq)


def test_multihead_and_series():
    h1 = AttentionHead(BilinearMap(X, X, RNG.normal(size=(3, 3))), LinearMap(X, Y, RNG.normal(size=(3, 2))))
    h2 = AttentionHead(BilinearMap(X, X, RNG.normal(size=(3, 3))), LinearMap(X, X, RNG.normal(size=(3, 3))), causal=True)
    multi = combine_in_parallel([h1, h2])
    assert isinstance(multi, MultiAttentionHead) and len(multi.heads()) == 2 and multi.heads()[1] is h2 and h1.heads() == (h1,)
    v = VectorInBasis(X.basis, RNG.normal(size=(5, 3)))
    assert multi.apply(v).allclose(VectorInBasis.sum([h1.apply(v), h2.apply(v)]))
    mlp = MLP(LinearMap(Y, _hidden("m", 2), RNG.normal(size=(2, 2))), LinearMap(_hidden("m", 2), Y, RNG.normal(size=(2, 2))))
    series = SeriesWithResiduals([multi, mlp])
    out = series.apply(v)
    stream = v.project(series.input_space)
    stream = stream + multi.apply(stream).project(stream.space)
    stream = stream + mlp.apply(stream).project(stream.space)
    assert out.allclose(stream)
    assert out.space.same_directions(series.output_space)
