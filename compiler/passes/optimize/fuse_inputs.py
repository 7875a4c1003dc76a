"""Fuse a categorical `Map` into the `SequenceMap` that alone reads it.

`SequenceMap(f, Map(g, X), Y)` computes `f(g(x), y)`; when nothing else reads the Map, one
two-input lookup MLP over `X` and `Y` computes it directly, saving the Map's MLP sub-layer (and
so often a layer) and its residual directions. (`compiler.passes.lower.fuse_elementwise` already fuses
the other direction, a Map *of* a SequenceMap.) When the fused inputs coincide (`f(g(x), x)`) the
lowering builds a one-input MLP of `X`.

`None` keeps its compiled meaning: a value of `X` with `g(x) is None` has no direction in the
unfused model, where the lookup MLP then writes nothing (None); the fused function returns None
there too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import networkx as nx

from compiler.passes import graph as g
from compiler.passes.allocate import node_inputs
from compiler.passes.optimize.fold_maps import APPLIED, map_operation
from rasp import rasp


def sequence_operation(graph: nx.DiGraph, label: str) -> tuple[Callable, tuple[str, str]]:
    node = graph.nodes[label]
    if "fn" in node:
        return node["fn"], tuple(node["inputs"])
    return node[g.EXPR].f, tuple(node_inputs(graph, label))


def _fused(f: Callable, first: Callable | None, second: Callable | None) -> Callable:
    def fused(x: Any, y: Any) -> Any:
        if first is not None:
            x = first(x)
        if second is not None:
            y = second(y)
        if x is None or y is None:
            return None
        return f(x, y)

    return fused


def _fusable_input(graph: nx.DiGraph, reader: str, label: str) -> bool:
    node = graph.nodes[label]
    if node[g.KIND] != "map" or label == graph.graph["sink"] or "fn" in node and len(node["inputs"]) != 1:
        return False
    if rasp.is_numerical(node[g.EXPR]) or list(graph.successors(label)) != [reader]:
        return False
    _, inner = map_operation(graph, label)
    return not rasp.is_numerical(graph.nodes[inner][g.EXPR])


def fuse_map_inputs(graph: nx.DiGraph) -> nx.DiGraph:
    """A copy of `graph` with every categorical Map read only by one SequenceMap fused into it."""
    graph = graph.copy()
    for label in g.sop_nodes(graph):
        node = graph.nodes[label]
        if node[g.KIND] != "sequence_map" or label not in graph:
            continue
        f, inputs = sequence_operation(graph, label)
        if any(rasp.is_numerical(graph.nodes[i][g.EXPR]) for i in inputs):
            continue
        maps = [i if _fusable_input(graph, label, i) else None for i in inputs]
        if not any(maps):
            continue
        new_inputs, functions = [], []
        for source, map_label in zip(inputs, maps):
            if map_label is None:
                new_inputs.append(source)
                functions.append(None)
            else:
                fn, inner = map_operation(graph, map_label)
                new_inputs.append(inner)
                functions.append(fn)
        node["fn"] = _fused(f, *functions)
        node["inputs"] = tuple(new_inputs)
        node["fused"] = tuple(node.get("fused", ())) + tuple(sorted({m for m in maps if m}))
        for map_label in sorted({m for m in maps if m}):
            graph.remove_node(map_label)
        for source in new_inputs:
            graph.add_edge(source, label)
        graph.graph[APPLIED] = tuple(graph.graph.get(APPLIED, ())) + (
            f"fuse_inputs: Map(s) {', '.join(sorted({m for m in maps if m}))} fused into the "
            f"SequenceMap {label}, which now reads {', '.join(dict.fromkeys(new_inputs))}",
        )
    return graph
