"""Fold a Map of a categorical Aggregate's output into the head: W_OV writes `f(value)` directly.

A categorical `Aggregate(select, V)` is exact only when its selected keys all carry the same
value v (RASP refuses anything else), so its head writes the one-hot of v, and a `Map(f, A)` of
it then writes `f(v)`. When nothing else reads `A`, one head can write `f(v)` itself: its `W_OV`
sends the one-hot of each value v to the encoding of `f(v)` (one-hot, or the number for a
numerical Map), which averaged over keys that all carry v is exactly `f(v)`. The default moves
through `f` too (`f(default)`; a None stays None, which a numerical Map writes as 0).

The fold removes the Map's MLP sub-layer (often a whole layer) and the Aggregate's directions.
The Map keeps its label, which now names the head; the Aggregate's label stays on the node
(`nodes.FOLDED_OUTPUT`, listed by the summary and shown in the head's picture).

Lowering composes `f` after any value Map `fold_maps` already folded into the same head.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import networkx as nx

from compiler.passes import graph as g
from compiler.passes import nodes
from rasp import rasp


@dataclasses.dataclass(frozen=True)
class FoldedOutput:
    """The Aggregate a head computed before the Map of its output was folded in, and the Map."""

    aggregate: str
    fn: Callable[[Any], Any]


def foldable_aggregate(graph: nx.DiGraph, label: str) -> str | None:
    """The Aggregate whose head can write Map `label` directly, or None."""
    node = graph.nodes[label]
    if node[nodes.KIND] is not g.NodeKind.MAP:
        return None
    _, (inner,) = g.operation(graph, label)
    inner_node = graph.nodes[inner]
    if inner_node[nodes.KIND] is not g.NodeKind.AGGREGATE or nodes.FOLDED_OUTPUT in inner_node or inner in graph.graph[nodes.SINKS]:
        return None
    if g.has_none_flag(graph, label):
        return None  # the head would write 0 for None, not the none flag
    if rasp.is_numerical(inner_node[nodes.EXPR]) or list(graph.successors(inner)) != [label]:
        return None  # a numerical mean is no selected value; another reader needs the Aggregate
    return inner


def _aggregate_writing(aggregate: rasp.Aggregate, label: str, fn: Callable, sop: rasp.SOp) -> rasp.Aggregate:
    """The Aggregate expression the head computes now: the Map's label, encoding and default."""
    default = None if aggregate.default is None else fn(aggregate.default)
    numerical = rasp.is_numerical(sop)
    if numerical and default is None:
        default = 0  # a numerical Map writes nothing (0) for None
    expr = rasp.Aggregate(aggregate.selector, aggregate.sop, default=default)
    return rasp.annotate(expr, **{**dict(sop.annotations), "name": label})


def fold_outputs_into_heads(graph: nx.DiGraph) -> nx.DiGraph:
    """A copy of `graph` in which each Map read off a categorical Aggregate only it reads is
    written by the Aggregate's head directly."""
    graph = graph.copy()
    for label in g.sop_nodes(graph):
        if label not in graph:
            continue
        aggregate = foldable_aggregate(graph, label)
        if aggregate is None:
            continue
        fn, _ = g.operation(graph, label)
        node, head = graph.nodes[label], graph.nodes[aggregate]
        node[nodes.EXPR] = _aggregate_writing(head[nodes.EXPR], label, fn, node[nodes.EXPR])
        node[nodes.KIND] = g.NodeKind.AGGREGATE
        node[nodes.FOLDED_OUTPUT] = FoldedOutput(aggregate, fn)
        node[nodes.INPUTS] = g.node_inputs(graph, aggregate)
        node.pop("fn", None)
        if nodes.FOLDED_MAPS in head:
            node[nodes.FOLDED_MAPS] = head[nodes.FOLDED_MAPS]
        for source in list(graph.predecessors(aggregate)):
            graph.add_edge(source, label)
        graph.remove_node(aggregate)
        graph.graph[nodes.APPLIED] = tuple(graph.graph.get(nodes.APPLIED, ())) + (
            f"fold_outputs: Map {label} of the Aggregate {aggregate} is written by {aggregate}'s "
            f"head directly (W_OV writes {label}; no {aggregate} directions, no MLP)",
        )
    return graph
