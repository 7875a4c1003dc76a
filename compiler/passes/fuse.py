"""Fuse chains of elementwise operations before validation and lowering.

A `Map` whose input is another `Map` (or a categorical `SequenceMap`) read by nothing else
becomes one node computing the composition: one MLP instead of two, saving a sub-layer and the
intermediate's residual directions. The fused node keeps the outer label and records its
function (`graph.FN`), its inputs (`graph.INPUTS`) and the labels it absorbed (`graph.FUSED`);
the absorbed node leaves the graph. Validation sizes and measures blocks on this graph, and
lowering builds them from it.
"""

from __future__ import annotations

import networkx as nx

from compiler.passes import graph as g
from compiler.passes import nodes
from rasp.functions import Composed


def fuse_elementwise(graph: nx.DiGraph) -> nx.DiGraph:
    """A copy of `graph` in which `Map(f, X)` is fused into `X` when X is a Map or a
    categorical SequenceMap read only by that Map (repeated until nothing fuses)."""
    graph = graph.copy()
    sinks = graph.graph[nodes.SINKS]
    changed = True
    while changed:
        changed = False
        for label in g.sop_nodes(graph):
            if graph.nodes[label][nodes.KIND] is not g.NodeKind.MAP:
                continue
            (inner,) = g.operation(graph, label)[1]
            inner_node = graph.nodes[inner]
            fusable = inner_node[nodes.KIND] is g.NodeKind.MAP or (
                inner_node[nodes.KIND] is g.NodeKind.SEQUENCE_MAP
                and not any(g.is_numerical(graph, i) for i in g.operation(graph, inner)[1])
            )
            if not fusable or inner in sinks or list(graph.successors(inner)) != [label]:
                continue
            outer_f, _ = g.operation(graph, label)
            inner_f, inputs = g.operation(graph, inner)
            node = graph.nodes[label]
            node[nodes.FN] = Composed(outer_f, inner_f)  # keeps RASP's None propagation
            node[nodes.INPUTS] = inputs
            node[nodes.KIND] = inner_node[nodes.KIND]
            node[nodes.FUSED] = tuple(inner_node.get(nodes.FUSED, ())) + (inner,)
            graph.remove_node(inner)
            for source in inputs:
                graph.add_edge(source, label)
            changed = True
            break
    return graph
