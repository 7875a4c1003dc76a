"""Assign every lowered block to a sub-layer of the transformer.

Sub-layers alternate: even indices are attention, odd indices are MLPs (sub-layer `2l` and
`2l + 1` form layer `l`). The default allocator schedules each operation as early as its inputs
allow (longest path from the embeddings), which packs independent operations into the same
sub-layer and gives the fewest layers a greedy schedule can. It sits behind the `Allocator`
signature, so an exact (e.g. ILP) allocator can replace it.
"""

from __future__ import annotations

from collections.abc import Callable

import networkx as nx

from compiler import graph as g
from compiler import selectors

# An allocator maps the lowered graph to {label: sub-layer index of the node's *last* block}.
Allocator = Callable[[nx.DiGraph], dict[str, int]]

EMBEDDED_KINDS = ("tokens", "indices", "full", "constant")


def node_inputs(graph: nx.DiGraph, label: str) -> tuple[str, ...]:
    """The s-op labels a node reads (through its selector, for attention nodes)."""
    node = graph.nodes[label]
    if "inputs" in node:
        return tuple(node["inputs"])
    expr = node[g.EXPR]
    kind = node[g.KIND]
    if kind in EMBEDDED_KINDS:
        return ()
    if kind == "map":
        return (expr.inner.label,)
    if kind in ("sequence_map", "linear_sequence_map"):
        return (expr.fst.label, expr.snd.label)
    leaves = selectors.conjunction(expr.selector)
    read = {name for leaf in leaves for name in (leaf.keys, leaf.queries)}
    if kind == "aggregate":
        read.add(expr.sop.label)
    return tuple(sorted(read))


def _next(after: int, parity: int) -> int:
    """First sub-layer index > `after` with the given parity (0 attention, 1 MLP)."""
    index = after + 1
    return index if index % 2 == parity else index + 1


def longest_path(graph: nx.DiGraph) -> dict[str, int]:
    """ASAP schedule: each node in the first sub-layer of its kind after all of its inputs."""
    ready: dict[str, int] = {}
    for label in g.sop_nodes(graph):
        kind = graph.nodes[label][g.KIND]
        if kind in EMBEDDED_KINDS:
            ready[label] = -1
            continue
        after = max((ready[i] for i in node_inputs(graph, label)), default=-1)
        if kind in ("map", "sequence_map", "linear_sequence_map"):
            ready[label] = _next(after, 1)
        elif kind == "aggregate":
            ready[label] = _next(after, 0)
        else:  # selector_width: attention, then the MLP right after it
            ready[label] = _next(after, 0) + 1
    return ready
