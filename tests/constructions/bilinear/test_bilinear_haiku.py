"""A bilinear gate MLP assembled by the compiler and run by the Haiku model matches Craft."""

import numpy as np
import pytest

pytest.importorskip("compiler.model.assemble")

from compiler.model.from_craft import model_from_craft
from compiler.passes.layout import CraftModel, Embeddings
from constructions.bilinear.to_craft import boolean_gate_mlp
from craft.bases import ONE, BasisDirection, VectorInBasis, VectorSpaceWithBasis, bos_direction

X, Y = BasisDirection("x"), BasisDirection("y")
BOS = bos_direction()


@pytest.mark.parametrize("table", [(0, 0, 0, 1), (1, 1, 0, 1), (1, 0, 0, 1)])
def test_bilinear_gate_in_haiku_model(table):
    out = BasisDirection("gate")
    mlp = boolean_gate_mlp(table, [X, Y], out, ONE, "g_hidden", bos_direction=BOS)
    residual = VectorSpaceWithBasis((X, Y, ONE, BOS, out))
    # ids: 0 = BOS, 1..4 = (x, y) in truth-table order, 5 = padding.
    tokens = np.zeros((6, residual.num_dims), dtype=np.float32)
    tokens[0, residual.index(BOS)] = 1.0
    for i, (x, y) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1)]):
        tokens[i + 1, residual.index(X)], tokens[i + 1, residual.index(Y)] = x, y
    position = np.zeros((5, residual.num_dims), dtype=np.float32)
    position[:, residual.index(ONE)] = 1.0
    model = model_from_craft(CraftModel(residual, (None, mlp), Embeddings(tokens, position, 5),
                                        VectorSpaceWithBasis((out,)), max_seq_len=4, causal=False,
                                        numerical_output=True))
    ids = np.array([[0, 1, 2, 3, 4]], dtype=np.int32)
    result = np.asarray(model.forward(model.params, ids).output)[0]
    assert np.abs(result - np.array((0,) + tuple(table))).max() < 1e-5
    stream = VectorInBasis(residual.basis, (tokens[ids[0]] + position[:5]).astype(np.float64))
    craft = mlp.apply(stream).magnitude(out)
    assert np.abs(result - craft).max() < 1e-5
