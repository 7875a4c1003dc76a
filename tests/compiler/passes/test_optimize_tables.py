"""`prune_tables`: two-input lookups keep only the input pairs that can meet at one position."""

from __future__ import annotations

import itertools

import numpy as np

from compiler import compile_rasp
from compiler.passes import graph as g
from compiler.passes import nodes
from compiler.passes.fuse import fuse_elementwise
from compiler.passes.optimize import applied
from compiler.passes.optimize.prune_tables import position_sets, prune_tables
from compiler.passes.optimize.prune_values import prune_values
from compiler.passes.values import infer_values
from craft.bases import BasisDirection, VectorInBasis, VectorSpaceWithBasis
from craft.blocks import MLP
from craft.chamber.categorical_mlp import sequence_map_categorical_mlp
from rasp import rasp

VOCAB = (0, 1, 2, 3)
ONE = VectorSpaceWithBasis((BasisDirection("one"),))


def _graph(program: rasp.SOp, max_seq_len: int):
    graph = g.trace(program)
    infer_values(graph, VOCAB, max_seq_len)
    graph = fuse_elementwise(graph)
    return graph


def _opposite():
    """`length - indices - 1`, the position a reversal reads (a SequenceMap after fusion)."""
    length = rasp.SelectorWidth(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE)).named("length")
    opposite = rasp.SequenceMap(lambda n, i: n - i, length, rasp.indices).named("opp")
    return rasp.Map(lambda x: x - 1, opposite).named("opp_minus_1")


def test_length_at_position_q_is_at_least_q_plus_one():
    graph = _graph(_opposite(), 4)
    assert position_sets(graph, "length", 4) == tuple(frozenset(range(q + 1, 5)) for q in range(4))
    assert position_sets(graph, "indices", 4) == tuple(frozenset({q}) for q in range(4))
    assert position_sets(graph, "tokens", 4) == (frozenset(VOCAB),) * 4


def test_the_table_of_length_minus_indices_keeps_the_pairs_with_length_above_the_index():
    graph = _graph(_opposite(), 4)
    pruned = prune_tables(graph)
    assert nodes.TABLE_PAIRS not in graph.nodes["opp_minus_1"]  # the pass is pure
    assert pruned.nodes["opp_minus_1"][nodes.TABLE_PAIRS] == {(n, i) for n in range(1, 5) for i in range(n)}
    (line,) = applied(pruned)
    assert line.startswith("prune_tables: the lookup table of opp_minus_1 keeps 10 of its 20 (length, indices) rows")


def test_pruned_model_is_smaller_and_equals_rasp_on_every_input():
    program = rasp.Aggregate(rasp.Select(rasp.indices, _opposite(), rasp.Comparison.EQ), rasp.tokens).named("rev")
    pruned = compile_rasp(program, VOCAB, 4)
    plain = compile_rasp(program, VOCAB, 4, optimize=["fold_maps", "fuse_inputs"])
    assert pruned.graph.nodes["opp_minus_1"][nodes.TABLE_PAIRS]
    assert (_table_units(pruned), _table_units(plain)) == (10, 20)
    inputs = [list(t) for n in range(1, 5) for t in itertools.product(VOCAB, repeat=n)]  # 340
    expected = [rasp.evaluate(program, tokens) for tokens in inputs]
    literal = compile_rasp(program, VOCAB, 4, optimize=False)
    for model in (pruned, plain, literal):  # length is refused causally: non-causal only
        assert [out[1:] for out in model.apply_batch([["BOS", *t] for t in inputs])] == expected


def _table_units(model) -> int:
    """Hidden units of the opp_minus_1 lookup in the compiled Craft model."""
    return sum(
        direction.name == "opp_minus_1_hidden"
        for block in model.craft_model.blocks
        if isinstance(block, MLP)
        for direction in block.hidden_space.basis
    )


def test_inputs_without_position_structure_keep_the_whole_table():
    doubled = rasp.Map(lambda x: 2 * x, rasp.tokens).named("doubled")
    program = rasp.SequenceMap(lambda a, b: a + b, doubled, rasp.tokens).named("sum")
    graph = prune_tables(_graph(program, 3))
    assert nodes.TABLE_PAIRS not in graph.nodes["sum"] and not applied(graph)


def test_lookup_mlp_builds_units_for_the_given_pairs_only():
    xs, ys = [1, 2, 3], [0, 1, 2]
    s1, s2 = VectorSpaceWithBasis.from_values("n", xs), VectorSpaceWithBasis.from_values("i", ys)
    out = VectorSpaceWithBasis.from_values("d", range(4))
    kept = {(n, i) for n in xs for i in ys if i < n}
    mlp = sequence_map_categorical_mlp(s1, s2, out, lambda n, i: n - i, ONE, "d_hidden", pairs=kept)
    assert mlp.hidden_space.num_dims == len(kept) == 6
    assert {d.value for d in mlp.hidden_space.basis} == kept
    for n, i in itertools.product(xs, ys):
        x = VectorSpaceWithBasis(s1.basis + s2.basis + ONE.basis)
        vector = np.zeros(x.num_dims)
        vector[x.index(BasisDirection("n", n))] = vector[x.index(BasisDirection("i", i))] = 1.0
        vector[x.index(BasisDirection("one"))] = 1.0
        written = mlp.apply(VectorInBasis(x.basis, vector[None, :])).magnitudes[0]
        expected = np.zeros(out.num_dims)
        if (n, i) in kept:
            expected[out.index(BasisDirection("d", n - i))] = 1.0
        np.testing.assert_array_equal(written, expected)  # exact: 0/1 weights, integer sums


def test_prune_values_keeps_only_what_the_kept_rows_produce():
    length = rasp.SelectorWidth(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE)).named("length")
    below = rasp.SequenceMap(lambda n, i: n > i, length, rasp.indices).named("below")  # always True
    program = rasp.SequenceMap(lambda b, t: (b, t), below, rasp.tokens).named("out")
    graph = _graph(program, 4)
    assert graph.nodes["below"][nodes.VALUE_SET] == {False, True}
    pruned = prune_values(prune_tables(graph))
    assert pruned.nodes["below"][nodes.VALUE_SET] == {True}
    assert pruned.nodes["out"][nodes.VALUE_SET] == {(True, t) for t in VOCAB}
    model = compile_rasp(program, VOCAB, 4)
    assert "below:False" not in model.residual_labels
    inputs = [list(t) for n in range(1, 5) for t in itertools.product(VOCAB, repeat=n)]
    got = model.apply_batch([["BOS", *t] for t in inputs])
    assert [out[1:] for out in got] == [rasp.evaluate(program, t) for t in inputs]
