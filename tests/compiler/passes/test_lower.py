"""`compiler.passes.fuse` and `compiler.passes.lower`: the Craft blocks of small graphs."""

from __future__ import annotations

import numpy as np

from compiler.passes import graph as g
from compiler.passes import nodes
from compiler.passes.fuse import fuse_elementwise
from compiler.passes.lower import LoweringOptions, lower
from compiler.passes.values import infer_values
from craft.bases import BasisDirection, VectorInBasis, bos_direction
from rasp import rasp
from rasp.functions import Composed


def _lowered(program, vocab=(1, 2, 3), max_seq_len=3):
    graph = g.trace(program)
    infer_values(graph, vocab, max_seq_len)
    lower(graph, LoweringOptions(max_seq_len=max_seq_len, causal=False, bos=bos_direction()))
    return graph


def _names(space) -> list[str]:
    return [str(d) for d in space.basis]


def test_a_categorical_map_is_a_thresholded_lookup_table():
    parity = rasp.Map(lambda x: x % 2, rasp.tokens).named("parity")
    (parity_kind, mlp), = _lowered(parity).nodes["parity"][nodes.BLOCKS]
    assert parity_kind == 1  # an MLP sub-layer
    assert _names(mlp.first.input_space) == ["tokens:1", "tokens:2", "tokens:3", "one"]
    assert _names(mlp.first.output_space) == ["parity_hidden:1", "parity_hidden:2", "parity_hidden:3"]
    # relu(2 x - one): 1 on the token's own unit, exactly 0 elsewhere.
    np.testing.assert_array_equal(mlp.first.matrix, [[2, 0, 0], [0, 2, 0], [0, 0, 2], [-1, -1, -1]])
    assert _names(mlp.output_space) == ["parity:0", "parity:1"]
    np.testing.assert_array_equal(mlp.second.matrix, [[0, 1], [1, 0], [0, 1]])  # 1->1, 2->0, 3->1


def test_an_aggregate_is_one_head_with_bos_half_a_point_below_a_match():
    parity = rasp.Map(lambda x: x % 2, rasp.tokens).named("parity")
    before = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT).named("before")
    previous = rasp.Aggregate(before, parity).named("previous")
    (kind, head), = _lowered(previous).nodes["previous"][nodes.BLOCKS]
    assert kind == 0  # an attention sub-layer
    assert _names(head.w_qk.left_space) == ["indices:0", "indices:1", "indices:2", "one"]
    assert _names(head.w_qk.right_space) == ["indices:0", "indices:1", "indices:2", "tokens:BOS"]
    # coldness 100 on every selected (key < query) pair; one x BOS gets 100 * (1 - 1/2).
    expected = np.zeros((4, 4))
    expected[1, 0] = expected[2, 0] = expected[2, 1] = 100.0
    expected[3, 3] = 50.0
    np.testing.assert_array_equal(head.w_qk.matrix, expected)
    assert _names(head.w_ov.input_space) == ["parity:0", "parity:1"]
    assert _names(head.w_ov.output_space) == ["previous:0", "previous:1"]
    np.testing.assert_array_equal(head.w_ov.matrix, np.eye(2))


def test_the_lowered_map_computes_its_function_on_every_value():
    square = rasp.numerical(rasp.Map(lambda x: x * x, rasp.tokens)).named("square")
    (_, mlp), = _lowered(square).nodes["square"][nodes.BLOCKS]
    space = mlp.input_space
    for token in (1, 2, 3):
        x = np.zeros((1, space.num_dims))
        x[0, space.index(BasisDirection("tokens", token))] = 1.0
        x[0, space.index(BasisDirection("one"))] = 1.0
        out = mlp.apply(VectorInBasis(space.basis, x))
        assert out.magnitudes[0, out.basis_directions.index(BasisDirection("square"))] == token * token


def test_fusion_composes_a_chain_of_maps_into_one_node():
    inner = rasp.Map(lambda x: x + 1, rasp.tokens).named("inner")
    outer = rasp.Map(lambda x: 2 * x, inner, simplify=False).named("outer")
    graph = g.trace(outer)
    infer_values(graph, (1, 2, 3), 3)
    fused = fuse_elementwise(graph)
    assert "inner" in graph and "inner" not in fused  # pure: the input graph is kept
    node = fused.nodes["outer"]
    assert node[nodes.INPUTS] == ("tokens",) and node[nodes.FUSED] == ("inner",)
    assert isinstance(node[nodes.FN], Composed) and node[nodes.FN](3) == 8
    assert g.operation(fused, "outer") == (node[nodes.FN], ("tokens",))
