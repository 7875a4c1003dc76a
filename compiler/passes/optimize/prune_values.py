"""Drop the values (residual directions) an s-op can never take in the optimised graph.

Value inference sees each s-op's inputs as independent. After `fuse_inputs` a SequenceMap may
read the same s-op twice (`f(g(x), x)`), so only the diagonal occurs, and every s-op computed
from it can take fewer values too. This pass recomputes, in topological order, the value set of
every categorical Map and SequenceMap over categorical inputs (and of categorical Aggregates,
which take their values' values) from the current value sets of its inputs, and keeps the
smaller set; a lookup table whose rows `prune_tables` pruned takes only the values of the rows
it kept. Fewer values mean fewer residual directions and smaller lookup MLPs downstream.
Sound: the recomputation is value inference itself, on sets that only shrank.
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from compiler.passes import graph as g
from compiler.passes import nodes
from rasp import rasp

# Most function evaluations spent on one s-op; beyond it the inferred set is kept.
MAX_EVALUATIONS = 1_000_000


def _categorical(graph: nx.DiGraph, label: str) -> bool:
    return not rasp.is_numerical(graph.nodes[label][nodes.EXPR])


def _recomputed(graph: nx.DiGraph, label: str) -> frozenset | None:
    """The values `label` can take given its inputs' current value sets; None when unknown."""
    node = graph.nodes[label]
    kind = node[nodes.KIND]
    arguments: list[tuple[Any, ...]] | None  # argument tuples of the node's function
    if kind is g.NodeKind.MAP:
        fn, (inner,) = g.operation(graph, label)
        arguments = [(x,) for x in graph.nodes[inner][nodes.VALUE_SET]] if _categorical(graph, inner) else None
    elif kind is g.NodeKind.SEQUENCE_MAP:
        fn, (fst, snd) = g.operation(graph, label)
        if not (_categorical(graph, fst) and _categorical(graph, snd)):
            return None
        xs, ys = graph.nodes[fst][nodes.VALUE_SET], graph.nodes[snd][nodes.VALUE_SET]
        if fst == snd:
            arguments = [(x, x) for x in xs]
        elif nodes.TABLE_PAIRS in node:  # only these rows of the table can occur (`prune_tables`)
            arguments = [(x, y) for x, y in node[nodes.TABLE_PAIRS] if x in xs and y in ys]
        elif len(xs) * len(ys) <= MAX_EVALUATIONS:
            arguments = [(x, y) for x in xs for y in ys]
        else:
            return None
    elif kind is g.NodeKind.AGGREGATE and node[nodes.EXPR].sop.label in graph:
        expr = node[nodes.EXPR]
        values = graph.nodes[expr.sop.label][nodes.VALUE_SET]
        if nodes.FOLDED_OUTPUT in node:  # the head writes f(value)
            fn, arguments = node[nodes.FOLDED_OUTPUT].fn, [(x,) for x in values]
        else:
            return frozenset(values | {expr.default}) - {None}
        try:
            return (frozenset(fn(*args) for args in arguments) | {expr.default}) - {None}
        except Exception:
            return None
    else:
        return None
    if arguments is None or len(arguments) > MAX_EVALUATIONS:
        return None
    try:
        return frozenset(fn(*args) for args in arguments) - {None}
    except Exception:
        return None


def prune_values(graph: nx.DiGraph) -> nx.DiGraph:
    """A copy of `graph` whose categorical s-ops keep only the values they can take."""
    graph = graph.copy()
    for label in g.sop_nodes(graph):
        if not _categorical(graph, label):
            continue
        old = graph.nodes[label][nodes.VALUE_SET]
        new = _recomputed(graph, label)
        if new is None or not new < old:
            continue
        graph.nodes[label][nodes.VALUE_SET] = new
        graph.graph[nodes.APPLIED] = tuple(graph.graph.get(nodes.APPLIED, ())) + (
            f"prune_values: {label} takes {len(new)} of its {len(old)} inferred values",
        )
    return graph
