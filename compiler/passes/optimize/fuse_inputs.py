"""Fuse a categorical `Map` into the `SequenceMap` that alone reads it.

`SequenceMap(f, Map(g, X), Y)` computes `f(g(x), y)`; when nothing else reads the Map, one
two-input lookup MLP over `X` and `Y` computes it directly, saving the Map's MLP sub-layer (and
so often a layer) and its residual directions. (`compiler.passes.fuse.fuse_elementwise` already fuses
the other direction, a Map *of* a SequenceMap.) When the fused inputs coincide (`f(g(x), x)`) the
lowering builds a one-input MLP of `X`.

Size guard: the fused table has one hidden unit per pair of (unmapped) input values, the
unfused model one per value of the Map's input plus one per pair of the table's inputs. A fusion
that would make the hidden units more (`tokens == "c"` over a large vocabulary fused into an
`and` of two booleans, as in `detect_pattern`) is not done: the model stays no larger than the
literal one-block-per-s-op layout.

`None` keeps its compiled meaning: a value of `X` with `g(x) is None` has no direction in the
unfused model, where the lookup MLP then writes nothing (None); the fused function returns None
there too.
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
class FusedInputs:
    """`f(first(x), second(y))` (`None` for an input without a fused Map), None when a fused Map
    gives None: the unfused lookup MLP has no direction for it and writes nothing."""

    f: Callable[[Any, Any], Any]
    first: Callable[[Any], Any] | None
    second: Callable[[Any], Any] | None

    def __call__(self, x: Any, y: Any) -> Any:
        if self.first is not None:
            x = self.first(x)
        if self.second is not None:
            y = self.second(y)
        if x is None or y is None:
            return None
        return self.f(x, y)


def _fusable_input(graph: nx.DiGraph, reader: str, label: str) -> bool:
    node = graph.nodes[label]
    if node[nodes.KIND] is not g.NodeKind.MAP or label in graph.graph[nodes.SINKS] or nodes.FN in node and len(node[nodes.INPUTS]) != 1:
        return False
    if rasp.is_numerical(node[nodes.EXPR]) or list(graph.successors(label)) != [reader]:
        return False
    _, (inner,) = g.operation(graph, label)
    return not rasp.is_numerical(graph.nodes[inner][nodes.EXPR])


def _size(graph: nx.DiGraph, label: str) -> int:
    return max(1, len(graph.nodes[label].get(nodes.VALUE_SET, ())))


def _smaller_fused(graph: nx.DiGraph, inputs: tuple[str, ...], maps: list[str | None]) -> bool:
    """Whether the fused table needs at most the hidden units of the Maps' MLPs and the table."""
    unfused = 1
    fused = 1
    maps_cost = 0
    for source, map_label in zip(inputs, maps):
        unfused *= _size(graph, source)
        if map_label is None:
            fused *= _size(graph, source)
        else:
            _, (inner,) = g.operation(graph, map_label)
            fused *= _size(graph, inner)
            maps_cost += _size(graph, inner)
    return fused <= unfused + maps_cost


def fuse_map_inputs(graph: nx.DiGraph) -> nx.DiGraph:
    """A copy of `graph` with every categorical Map read only by one SequenceMap fused into it."""
    graph = graph.copy()
    for label in g.sop_nodes(graph):
        node = graph.nodes[label]
        if node[nodes.KIND] is not g.NodeKind.SEQUENCE_MAP or label not in graph:
            continue
        f, inputs = g.operation(graph, label)
        if any(rasp.is_numerical(graph.nodes[i][nodes.EXPR]) for i in inputs):
            continue
        maps = [i if _fusable_input(graph, label, i) else None for i in inputs]
        if not any(maps) or not _smaller_fused(graph, inputs, maps):
            continue
        new_inputs: list[str] = []
        functions: list[Callable[[Any], Any] | None] = []
        for source, map_label in zip(inputs, maps):
            if map_label is None:
                new_inputs.append(source)
                functions.append(None)
            else:
                fn, (inner,) = g.operation(graph, map_label)
                new_inputs.append(inner)
                functions.append(fn)
        node[nodes.FN] = FusedInputs(f, *functions)
        node[nodes.INPUTS] = tuple(new_inputs)
        node[nodes.FUSED] = tuple(node.get(nodes.FUSED, ())) + tuple(sorted({m for m in maps if m}))
        for map_label in sorted({m for m in maps if m}):
            graph.remove_node(map_label)
        for source in new_inputs:
            graph.add_edge(source, label)
        graph.graph[nodes.APPLIED] = tuple(graph.graph.get(nodes.APPLIED, ())) + (
            f"fuse_inputs: Map(s) {', '.join(sorted({m for m in maps if m}))} fused into the "
            f"SequenceMap {label}, which now reads {', '.join(dict.fromkeys(new_inputs))}",
        )
    return graph
