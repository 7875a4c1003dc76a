"""`compiler.model.from_craft`: Craft blocks -> Haiku model, checked against the numpy Craft run."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.model.config import AttentionSpec, MLPSpec
from compiler.model.from_craft import embeddings_from_vectors, model_from_craft
from compiler.passes.layout import CraftModel
from craft.bases import ONE, TOKENS_NAME, BasisDirection, VectorInBasis, VectorSpaceWithBasis, bos_direction, join_vector_spaces
from craft.blocks import SeriesWithResiduals
from craft.chamber.categorical_attn import attention_head, numerical_value_map, selector_qk
from craft.chamber.categorical_mlp import map_categorical_mlp

VOCAB = (1, 2, 3)
MAX_SEQ_LEN = 4
BOS = bos_direction()
TOKENS = VectorSpaceWithBasis.from_values(TOKENS_NAME, VOCAB)
MEAN = VectorSpaceWithBasis.from_names(["mean"])
DOUBLE = VectorSpaceWithBasis.from_values("double", [2 * v for v in VOCAB])


def _blocks():
    """Attention: mean of the tokens <= the query token; MLP: the token doubled (one-hot)."""
    head = attention_head(
        selector_qk(TOKENS, TOKENS, lambda key, query: key <= query),
        1,
        numerical_value_map(TOKENS, MEAN),
        VectorSpaceWithBasis((BOS,)),
        VectorSpaceWithBasis((ONE,)),
    )
    mlp = map_categorical_mlp(TOKENS, DOUBLE, lambda x: 2 * x)
    return [head, mlp]


def _model(numerical_output: bool = False):
    sublayers = _blocks()
    residual = join_vector_spaces(
        VectorSpaceWithBasis((ONE, BOS)), TOKENS, MEAN, DOUBLE, *(b.input_space for b in sublayers)
    )
    tokens = [residual.vector_from_basis_direction(BOS)]
    tokens += [residual.vector_from_basis_direction(BasisDirection(TOKENS_NAME, v)) for v in VOCAB]
    tokens.append(None)  # padding
    one = residual.vector_from_basis_direction(ONE)
    embeddings = embeddings_from_vectors(residual, tokens, [one] * (MAX_SEQ_LEN + 1), pad_id=len(VOCAB) + 1)
    output = MEAN if numerical_output else DOUBLE
    model = model_from_craft(CraftModel(
        residual, tuple(sublayers), embeddings, output, max_seq_len=MAX_SEQ_LEN, causal=False,
        numerical_output=numerical_output,
    ))
    return model, residual, embeddings, sublayers


def test_embeddings_from_vectors_writes_rows_and_zeros_for_none():
    _, residual, embeddings, _ = _model()
    assert embeddings.token.shape == (len(VOCAB) + 2, residual.num_dims)
    assert embeddings.token.dtype == np.float32
    assert embeddings.token[0, residual.index(BOS)] == 1.0 and embeddings.token[0].sum() == 1.0
    for i, value in enumerate(VOCAB):
        row = embeddings.token[i + 1]
        assert row[residual.index(BasisDirection(TOKENS_NAME, value))] == 1.0 and row.sum() == 1.0
    assert not embeddings.token[-1].any()
    np.testing.assert_array_equal(embeddings.position[:, residual.index(ONE)], np.ones(MAX_SEQ_LEN + 1))
    assert embeddings.pad_id == len(VOCAB) + 1


def test_embeddings_from_vectors_refuses_a_direction_outside_the_residual():
    residual = VectorSpaceWithBasis((ONE, BOS))
    stray = VectorInBasis((BasisDirection("stray"),), np.ones(1))
    with pytest.raises(ValueError, match="token row 1 writes stray"):
        embeddings_from_vectors(residual, [None, stray], [None], pad_id=0)


def test_haiku_model_matches_the_craft_evaluation():
    model, residual, embeddings, sublayers = _model()
    assert [type(layer) for layer in model.config.layers] == [AttentionSpec, MLPSpec]
    ids = np.array([[0, 3, 1, 2, 3], [0, 2, 2, 4, 4]], dtype=np.int32)  # 4 = padding
    out = model.forward(model.params, ids)
    stream = embeddings.token[ids] + embeddings.position[: ids.shape[1]]
    craft = SeriesWithResiduals(tuple(sublayers)).apply(VectorInBasis(residual.basis, stream.astype(np.float64)))
    # Tolerance: float32 forward pass, softmax with inverse temperature 100 (e^-50 leak).
    final = np.asarray(out.residuals[-1])
    expected = craft.project(residual).magnitudes
    np.testing.assert_allclose(final[0], expected[0], atol=1e-5)
    # Padded keys are masked in the model; they write no token, so they score 0 in Craft too.
    np.testing.assert_allclose(final[1, :3], expected[1, :3], atol=1e-5)
    # The MLP's one-hot output read through the unembedding: token x -> double:2x.
    logits = np.asarray(out.output)[0, 1:]
    np.testing.assert_allclose(logits, np.eye(3)[[2, 0, 1, 2]], atol=1e-5)


def test_numerical_output_reads_the_single_output_direction():
    model, *_ = _model(numerical_output=True)
    out = np.asarray(model.forward(model.params, np.array([[0, 3, 1, 2]], dtype=np.int32)).output)
    assert out.shape == (1, 4)
    # Mean of the tokens <= each query: 3 -> (3+1+2)/3, 1 -> 1, 2 -> (1+2)/2.
    np.testing.assert_allclose(out[0, 1:], [2.0, 1.0, 1.5], atol=1e-5)


def test_params_hold_the_assembled_weights_under_the_module_name():
    model, *_ = _model()
    assert set(model.params) == {
        "compiled_transformer/embed", "compiled_transformer/layer_0",
        "compiled_transformer/layer_1", "compiled_transformer/unembed",
    }
    assert set(model.params["compiled_transformer/layer_0"]) == {"head_0_q", "head_0_k", "head_0_v", "head_0_o"}


def test_weight_accessors_read_the_craft_head_back():
    from compiler.model import weights

    model, residual, _, sublayers = _model()
    assert weights.attention_sublayers(model) == (0,)
    (head,) = weights.layer_heads(model, 0)
    np.testing.assert_array_equal(head.w_q, weights.head_weights(model, 0, 0).w_q)
    craft_head = sublayers[0]
    expected_qk = np.zeros((residual.num_dims, residual.num_dims))
    rows = residual.indices(craft_head.w_qk.left_space.basis)
    cols = residual.indices(craft_head.w_qk.right_space.basis)
    expected_qk[np.ix_(rows, cols)] = craft_head.w_qk.matrix
    np.testing.assert_allclose(head.w_qk, expected_qk, atol=1e-4)  # float32 of entries up to 100
    with pytest.raises(ValueError, match="sub-layer 1 is an MLP"):
        weights.layer_heads(model, 1)
