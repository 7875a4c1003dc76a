"""`compiler.passes.graph`: tracing, node kinds, edges, labels and the graph queries."""

from __future__ import annotations

import pytest

from compiler.errors import UnsupportedProgramError
from compiler.passes import graph as g
from compiler.passes import nodes
from rasp import rasp


def _program():
    doubled = rasp.Map(lambda x: 2 * x, rasp.tokens).named("doubled")
    same = rasp.Select(rasp.tokens, doubled, rasp.Comparison.EQ).named("same")
    count = rasp.SelectorWidth(same).named("count")
    mean = rasp.numerical(rasp.Aggregate(same, rasp.numerical(rasp.Map(float, rasp.indices).named("pos")))).named("mean")
    return rasp.SequenceMap(lambda a, b: (a, b), count, doubled).named("out"), mean


def test_trace_records_every_expression_with_its_kind():
    out, _ = _program()
    graph = g.trace(out)
    kinds = {label: data[nodes.KIND] for label, data in graph.nodes(data=True)}
    assert kinds == {
        "tokens": g.NodeKind.TOKENS,
        "doubled": g.NodeKind.MAP,
        "same": g.NodeKind.SELECT,
        "count": g.NodeKind.SELECTOR_WIDTH,
        "out": g.NodeKind.SEQUENCE_MAP,
    }
    assert graph.graph[nodes.SINK] == "out" and graph.graph[nodes.SOURCES] == ("tokens",)
    assert all(graph.nodes[label][nodes.NAME] == label for label in graph)


def test_edges_run_from_each_child_to_its_reader():
    out, _ = _program()
    graph = g.trace(out)
    assert set(graph.edges) == {
        ("tokens", "doubled"),
        ("tokens", "same"),
        ("doubled", "same"),
        ("same", "count"),
        ("count", "out"),
        ("doubled", "out"),
    }
    assert g.sop_nodes(graph) == ["tokens", "doubled", "count", "out"]
    assert g.consumers(graph, "doubled") == ["count", "out"]  # through the selector
    assert g.consumers(graph, "tokens") == ["count", "doubled"]


def test_node_inputs_look_through_selectors():
    _, mean = _program()
    graph = g.trace(mean)
    assert g.node_inputs(graph, "mean") == ("doubled", "pos", "tokens")
    assert g.node_inputs(graph, "pos") == ("indices",)
    assert g.node_inputs(graph, "tokens") == ()


def test_kind_groups():
    assert {k for k in g.NodeKind if k.embedded} == {
        g.NodeKind.TOKENS, g.NodeKind.INDICES, g.NodeKind.FULL, g.NodeKind.CONSTANT
    }
    assert {k for k in g.NodeKind if k.elementwise} == {
        g.NodeKind.MAP, g.NodeKind.SEQUENCE_MAP, g.NodeKind.LINEAR_SEQUENCE_MAP
    }
    assert {k for k in g.NodeKind if k.attention} == {g.NodeKind.AGGREGATE, g.NodeKind.SELECTOR_WIDTH}
    assert str(g.NodeKind.LINEAR_SEQUENCE_MAP) == "linear_sequence_map"


def test_repeated_names_get_suffixes_and_keep_the_user_name():
    first = rasp.Map(lambda x: x + 1, rasp.tokens).named("step")
    second = rasp.Map(lambda x: x * 3, first, simplify=False).named("step")
    graph = g.trace(second)
    assert sorted(g.sop_nodes(graph)) == ["step", "step_2", "tokens"]
    assert {graph.nodes[label][nodes.NAME] for label in ("step", "step_2")} == {"step"}


def test_a_constant_selector_reads_indices():
    selector = rasp.ConstantSelector([[True, False], [True, True]]).named("fixed")
    program = rasp.Aggregate(selector, rasp.tokens).named("agg")
    graph = g.trace(program)
    assert graph.nodes["fixed"][nodes.KIND] is g.NodeKind.CONSTANT_SELECTOR
    assert ("indices", "fixed") in graph.edges
    assert graph.graph[nodes.SOURCES] == ("tokens", "indices")


def test_length_is_expanded_and_recorded():
    graph = g.trace(rasp.Map(lambda n: n - 1, rasp.length).named("last"))
    assert graph.graph[nodes.USES_LENGTH] is True
    assert graph.nodes["length"][nodes.KIND] is g.NodeKind.SELECTOR_WIDTH


def test_refusals_name_the_problem():
    with pytest.raises(UnsupportedProgramError, match="never reads `tokens`"):
        g.trace(rasp.Map(lambda i: i + 1, rasp.indices).named("shifted"))
    with pytest.raises(UnsupportedProgramError, match="must be an s-op"):
        g.trace(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ))
