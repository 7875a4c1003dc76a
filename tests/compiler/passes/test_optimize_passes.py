"""Unit tests of each optimisation pass on small graphs, and of pass selection."""

from __future__ import annotations

import pytest

from compiler import InvalidInputError, compile_rasp
from compiler.passes import graph as g
from compiler.passes import nodes
from compiler.passes.fuse import fuse_elementwise
from compiler.passes.optimize import PASSES, applied, optimize_graph, selected_passes
from compiler.passes.optimize.fold_maps import fold_leaves, fold_maps_into_attention, value_map
from compiler.passes.optimize.fuse_inputs import fuse_map_inputs
from compiler.passes.optimize.prune_values import prune_values
from compiler.passes.selectors import Leaf
from compiler.passes.values import infer_values
from craft.bases import VectorSpaceWithBasis
from rasp import rasp

VOCAB = (0, 1, 2, 3)


def _graph(program: rasp.SOp, max_seq_len: int = 4):
    graph = g.trace(program)
    infer_values(graph, VOCAB, max_seq_len)
    graph = fuse_elementwise(graph)
    return graph


def _parity_program():
    parity = rasp.Map(lambda x: x % 2, rasp.tokens).named("parity")
    same = rasp.Select(parity, parity, rasp.Comparison.EQ).named("same")
    return rasp.Aggregate(same, rasp.tokens).named("out"), parity


def test_fold_into_keys_and_queries_removes_the_map_and_records_it():
    program, _ = _parity_program()
    graph = _graph(program)
    folded = fold_maps_into_attention(graph)
    assert "parity" in graph  # the pass is pure
    assert "parity" not in folded
    head = folded.nodes["out"]
    assert head[nodes.FOLDED_MAPS]["parity"].roles == ("keys", "queries")
    assert head[nodes.FOLDED_MAPS]["parity"].inner == "tokens"
    assert g.node_inputs(folded, "out") == ("tokens",)
    assert applied(folded) == ("fold_maps: Map parity (of tokens) folded into the keys/queries of head(s) out",)


def test_fold_into_values_of_a_numerical_aggregate_saves_the_mlp_layer():
    is_x = rasp.numerical(rasp.Map(lambda x: 1 if x == 3 else 0, rasp.tokens)).named("is_x")
    everything = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.TRUE).named("everything")
    program = rasp.numerical(rasp.Aggregate(everything, is_x, default=0)).named("frac")
    folded = fold_maps_into_attention(_graph(program))
    assert folded.nodes["frac"][nodes.FOLDED_MAPS]["is_x"].roles == ("values",)
    optimised = compile_rasp(program, VOCAB, 4)
    plain = compile_rasp(program, VOCAB, 4, optimize=False)
    assert (optimised.config.num_layers, plain.config.num_layers) == (1, 2)
    assert not any(label.startswith("is_x") for label in optimised.residual_labels)
    for tokens in ([3], [0, 3], [3, 3, 1, 2], [0, 1, 2, 0]):
        expected = rasp.evaluate(program, tokens)
        got = optimised.apply(["BOS"] + tokens).decoded[1:]
        assert got == pytest.approx(expected, abs=1e-5)  # float32 means of 0/1 values


def test_a_map_with_a_non_attention_reader_or_as_output_is_not_folded():
    program, parity = _parity_program()
    both = rasp.SequenceMap(lambda a, b: a + b, program, parity).named("both")
    assert "parity" in fold_maps_into_attention(_graph(both))
    assert "parity" in fold_maps_into_attention(_graph(parity))  # the sink stays


def test_a_map_of_a_numerical_s_op_is_not_folded():
    is_x = rasp.numerical(rasp.Map(lambda x: 1 if x == 3 else 0, rasp.tokens)).named("is_x")
    prefix = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ)
    number = rasp.numerical(rasp.Aggregate(prefix, is_x, default=0)).named("frac")
    bucket = rasp.Map(lambda x: x > 0.6, number).named("bucket")
    select = rasp.Select(bucket, bucket, rasp.Comparison.EQ)
    program = rasp.Aggregate(select, rasp.tokens).named("out")
    assert "bucket" in fold_maps_into_attention(_graph(program))


def test_folded_leaves_compose_the_predicate_and_never_select_none():
    class Fold:
        def __init__(self, inner, fn):
            self.inner, self.fn = inner, fn

    leaf = Leaf(keys="m", queries="q", predicate=lambda k, q: k == q, negated=False)
    (folded,) = fold_leaves((leaf,), {"m": Fold("tokens", lambda x: None if x == 0 else x % 2)})
    assert (folded.keys, folded.queries) == ("tokens", "q")
    assert folded.predicate(3, 1) and not folded.predicate(2, 1) and not folded.predicate(0, None)
    assert not folded.predicate(0, 0)  # f(0) is None: no direction, never selected


def test_value_map_writes_f_of_each_value_and_nothing_for_none():
    inner = VectorSpaceWithBasis.from_values("tokens", [0, 1, 2])
    out = VectorSpaceWithBasis.from_values("out", ["even", "odd"])
    fn = lambda x: None if x == 2 else ("even" if x % 2 == 0 else "odd")
    matrix = value_map(inner, out, fn, numerical=False).matrix
    assert matrix.tolist() == [[1, 0], [0, 1], [0, 0]]
    numerical = value_map(inner, VectorSpaceWithBasis.from_names(["n"]), lambda x: 2 * x, numerical=True)
    assert numerical.matrix[:, 0].tolist() == [0, 2, 4]


def test_fuse_inputs_reads_the_maps_input_directly():
    shifted = rasp.Map(lambda x: x + 1, rasp.tokens).named("shifted")
    program = rasp.SequenceMap(lambda a, i: a * i, shifted, rasp.indices).named("product")
    graph = _graph(program)
    fused = fuse_map_inputs(graph)
    assert "shifted" in graph and "shifted" not in fused
    node = fused.nodes["product"]
    assert node["inputs"] == ("tokens", "indices")
    assert node["fn"](2, 3) == 9 and node["fused"] == ("shifted",)
    model = compile_rasp(program, VOCAB, 4)
    assert model.config.num_layers == 1
    assert compile_rasp(program, VOCAB, 4, optimize=False).config.num_layers == 2
    assert model.apply(["BOS", 3, 0, 2]).decoded[1:] == rasp.evaluate(program, [3, 0, 2])


def test_fuse_inputs_keeps_maps_that_others_read_and_none_stays_none():
    maybe = rasp.Map(lambda x: None if x == 0 else x, rasp.tokens).named("maybe")
    program = rasp.SequenceMap(lambda a, b: a + b, maybe, rasp.tokens).named("sum")
    fused = fuse_map_inputs(_graph(program))
    assert fused.nodes["sum"]["fn"](0, 2) is None and fused.nodes["sum"]["fn"](1, 2) == 3
    shared = rasp.SequenceMap(lambda a, b: (a, b), program, maybe).named("pair")
    assert "maybe" in fuse_map_inputs(_graph(shared))


def test_pass_selection():
    assert selected_passes(True) == tuple(PASSES)
    assert selected_passes(False) == () and selected_passes(()) == ()
    assert selected_passes(["factor_qk", "fuse_inputs", "fold_maps"]) == ("fold_maps", "fuse_inputs", "factor_qk")
    with pytest.raises(InvalidInputError, match="unknown pass.*fold_everything"):
        selected_passes(["fold_everything"])
    with pytest.raises(InvalidInputError, match="got the string"):
        selected_passes("fold_maps")
    with pytest.raises(InvalidInputError, match="optimize"):
        compile_rasp(rasp.Map(lambda x: x, rasp.tokens), VOCAB, 3, optimize=3)


def test_optimize_graph_runs_passes_in_order_without_changing_its_input():
    program, _ = _parity_program()
    graph = _graph(program)
    nodes = set(graph.nodes)
    assert set(optimize_graph(graph, ()).nodes) == nodes
    assert "parity" not in optimize_graph(graph, selected_passes(True))
    assert set(graph.nodes) == nodes


def test_prune_values_keeps_only_the_diagonal_after_fusing_a_map_into_its_reader():
    packed = rasp.Map(lambda x: (x,), rasp.tokens).named("packed")
    pair = rasp.SequenceMap(lambda xs, y: (*xs, y), packed, rasp.tokens).named("pair")
    program = rasp.Map(lambda p: p[0] + p[1], pair).named("total")  # fused into `pair`
    program = rasp.SequenceMap(lambda t, i: t * i, program, rasp.indices).named("out")
    graph = fuse_map_inputs(_graph(program))
    before = len(graph.nodes["total"][nodes.VALUE_SET])
    pruned = prune_values(graph)
    assert graph.nodes["total"][nodes.VALUE_SET] != pruned.nodes["total"][nodes.VALUE_SET]  # pure
    assert pruned.nodes["total"][nodes.VALUE_SET] == {0, 2, 4, 6}  # x + x only
    assert before == 7  # 0..6 when the two inputs were taken as independent
    assert pruned.nodes["out"][nodes.VALUE_SET] == {t * i for t in (0, 2, 4, 6) for i in range(4)}
    assert "prune_values: total takes 4 of its 7 inferred values" in applied(pruned)
    model = compile_rasp(program, VOCAB, 4)
    assert not any(label == "total:1" for label in model.residual_labels)
    assert model.apply(["BOS", 3, 1, 2]).decoded[1:] == rasp.evaluate(program, [3, 1, 2])


def test_the_summary_names_every_optimisation():
    from compiler.cli.summary import model_summary, summary_text

    program, _ = _parity_program()
    text = summary_text(model_summary(compile_rasp(program, VOCAB, 4)))
    assert "optimised: fold_maps: Map parity (of tokens) folded into the keys/queries of head(s) out" in text
    assert "optimised" not in summary_text(model_summary(compile_rasp(program, VOCAB, 4, optimize=False)))


@pytest.mark.filterwarnings("ignore::compiler.errors.CausalSemanticsWarning")
@pytest.mark.parametrize("causal", [False, True])
def test_a_map_folded_into_selector_keys_keeps_the_aggregates_default(causal):
    # The BOS default must be proven unnecessary on the folded leaves (the Map's node is gone).
    import itertools

    incremented = rasp.Map(lambda x: x + 1, rasp.tokens).named("incremented")
    select = rasp.Select(incremented, rasp.tokens, rasp.Comparison.EQ)
    program = rasp.Aggregate(select, rasp.indices, default=7).named("out")
    model = compile_rasp(program, VOCAB, 4, causal=causal)
    assert applied(model.graph) == ("fold_maps: Map incremented (of tokens) folded into the keys of head(s) out",)
    inputs = [list(t) for n in range(1, 5) for t in itertools.product(VOCAB, repeat=n)]
    compared = 0
    for tokens, got in zip(inputs, model.apply_batch([["BOS", *t] for t in inputs])):
        try:
            expected = rasp.evaluate(program, tokens, causal=causal)
        except rasp.RaspEvaluationError:
            continue  # several selected keys carrying different indices
        compared += 1
        assert got[1:] == expected, tokens
    assert compared >= 200


@pytest.mark.parametrize("causal", [False, True])
def test_narrow_lookups_gives_an_equality_map_two_units_and_the_same_outputs(causal):
    # `tokens == "c"` over 12 tokens: one unit for c, one for the complement (tokens is never
    # None), instead of one per token; without the pass (what the features stage compiles, with
    # optimize=False) every token keeps its unit.
    vocab = ["a", "b", "c", *(f"t{i}" for i in range(9))]
    is_c = rasp.Map(lambda t: t == "c", rasp.tokens).named("is_c")
    program = rasp.SequenceMap(lambda c, i: (c, i % 2), is_c, rasp.indices).named("out")
    without = [name for name in PASSES if name != "narrow_lookups"]
    narrow = compile_rasp(program, vocab, 6, causal=causal)
    wide = compile_rasp(program, vocab, 6, causal=causal, optimize=without)

    def is_c_units(model):
        return [d for block in model.sublayers if block is not None and hasattr(block, "hidden_space")
                for d in block.hidden_space.basis if d.name == "is_c_hidden"]

    assert len(is_c_units(narrow)) == 2 and len(is_c_units(wide)) == len(vocab)
    assert "narrow_lookups: Map is_c (of tokens) with 2 hidden units instead of 12" in applied(narrow.graph)
    rows = [["BOS", *(vocab[(3 * k + j) % len(vocab)] for j in range(k % 7))] for k in range(24)]
    assert narrow.apply_batch(rows) == wide.apply_batch(rows)
    for row, decoded in zip(rows, narrow.apply_batch(rows)):
        assert decoded[1:] == rasp.evaluate(program, row[1:], causal=causal)
