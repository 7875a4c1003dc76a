"""Construction blocks as Craft blocks: numpy Craft evaluation vs the builders, and the Haiku
model assembled by the compiler vs the Craft evaluation."""

import numpy as np
import pytest

from constructions.superposition.boolean_circuit import build_two_layer_circuit
from constructions.superposition.features import random_unit_features
from constructions.superposition.quadratic import build_quadratic_uand
from constructions.superposition.sfb import build_sfb_random_projection, random_bigrams
from constructions.superposition.targeted import build_targeted_uand, random_pair_gates
from constructions.superposition.uand import build_uand
from craft.bases import ONE, BasisDirection, VectorInBasis, VectorSpaceWithBasis
from craft.maps import LinearMap


def _with_one(block, x):
    stream = np.hstack([x, np.ones((x.shape[0], 1))])
    return block.apply(VectorInBasis(block.input_space.basis, stream)).magnitudes


def test_uand_mlp_matches_numpy():
    layer = build_uand(16, 256, 0.3, 0)
    x = layer.inputs.embed(np.array([[1, 2], [3, 5], [0, 15]]))
    np.testing.assert_allclose(_with_one(layer.mlp, x), layer(x), atol=1e-5)
    assert layer.mlp.hidden_space.num_dims == 256 and layer.mlp.output_space.num_dims == 120


def test_targeted_and_quadratic_mlps_match_numpy():
    feats = random_unit_features("res", 128, 32, 0)
    tl = build_targeted_uand(feats, random_pair_gates(128, 64, 1), 256, 8, 2)
    x = feats.embed(np.array([[1, 2], [3, 5]]))
    np.testing.assert_allclose(_with_one(tl.mlp, x), tl(x), atol=1e-5)
    q = build_quadratic_uand(feats, random_pair_gates(128, 20, 3))
    assert q.mlp.activation == "square"
    np.testing.assert_allclose(_with_one(q.mlp, x), q(x), atol=1e-4)


def test_two_layer_craft_model_matches_numpy():
    circuit = build_two_layer_circuit(64, 64, 16, 128, 128, 4, 0)
    x0 = circuit.inputs.embed(circuit.chains[:5])
    _, _, y2 = circuit.run(x0)
    model = circuit.craft_model
    stream = VectorInBasis(circuit.inputs.space.basis, x0)
    one = VectorInBasis((ONE,), np.ones((5, 1)))
    out = model.apply(VectorInBasis.sum([stream, one]))
    got = out.project(circuit.layer2.mlp.output_space).magnitudes
    np.testing.assert_allclose(got, y2, atol=1e-4)


@pytest.fixture(scope="module")
def construction_model():
    pytest.importorskip("compiler.model.assemble")
    from constructions.common.in_model import build_construction_model

    feats = random_unit_features("res", 64, 32, 0)
    sfb = build_sfb_random_projection(feats, random_bigrams(64, 32, 1), 4, 2)
    rng = np.random.default_rng(3)
    w_ov = LinearMap(feats.space, _out_space(), rng.standard_normal((32, 3)))
    head = sfb.head(w_ov=w_ov)
    uand = build_targeted_uand(feats, random_pair_gates(64, 40, 4), 128, 6, 5)
    quad = build_quadratic_uand(feats, random_pair_gates(64, 10, 6), name="quad")
    sets = rng.integers(0, 64, size=(12, 2))
    tokens = [VectorInBasis(feats.space.basis, feats.embed(s[None])[0]) for s in sets]
    return build_construction_model([head, uand.mlp, None, quad.mlp], tokens, max_seq_len=6), head


def _out_space():
    return VectorSpaceWithBasis([BasisDirection("sfb_out", i) for i in range(3)])


def test_haiku_forward_matches_craft(construction_model):
    model, _ = construction_model
    rng = np.random.default_rng(7)
    ids = np.concatenate([np.zeros((4, 1), int), rng.integers(1, 13, size=(4, 6))], axis=1)
    haiku = model.run_haiku(ids)
    craft = model.run_craft(ids)
    assert np.abs(craft).max() > 0.5
    np.testing.assert_allclose(haiku, craft, atol=2e-4, rtol=1e-4)


def test_explicit_factor_head_keeps_width_after_assembly(construction_model):
    model, head = construction_model
    spec = model.config.layers[0].heads[0]
    assert spec.w_q.shape == (32, 4) and spec.w_k.shape == (32, 4)
    assert head.w_q.shape == (32, 4)
