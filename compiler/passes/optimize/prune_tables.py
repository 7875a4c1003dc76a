"""Drop the rows of a two-input lookup table that no input can ever present.

A categorical `SequenceMap(f, X, Y)` is lowered to one hidden ReLU unit per pair `(x, y)` of the
two value sets. Often most pairs never meet at one position: `length - indices` only sees
`length > index`, because at position q the length is at least q + 1. This pass computes, from
per-position value sets, every pair that can occur,

    pairs = union over positions q of  X(q) x Y(q),

and records it on the node (`nodes.TABLE_PAIRS`); the lowering then builds units for those pairs only.
Exact: a pair left out never reaches the MLP at a real position, and at BOS both inputs are
empty, where no unit fires either way.

Per-position sets come from value inference (`BY_POSITION`, `compiler.passes.positional`), and
for a `SelectorWidth` of an always-true selector over s-ops that are never None (`length`), from
its meaning: at position q it counts at least the q + 1 positions up to q (exactly q + 1 in a
causal model). Any other s-op may take every value of its value set at every position.
"""

from __future__ import annotations

import networkx as nx

from compiler.passes import graph as g
from compiler.passes import nodes
from compiler.passes.positional import MAX_PAIRS
from rasp import rasp


def _counts_every_position(graph: nx.DiGraph, label: str) -> bool:
    """Whether `label` is a SelectorWidth selecting every key (the input's length)."""
    expr = graph.nodes[label][nodes.EXPR]
    if graph.nodes[label][nodes.KIND] is not g.NodeKind.SELECTOR_WIDTH:
        return False
    selector = expr.selector
    if not isinstance(selector, rasp.Select) or selector.predicate is not rasp.Comparison.TRUE:
        return False
    children = [child.label for child in selector.children]
    if any(child not in graph for child in children):
        return False  # a Map folded into the head (it may be None): not provably every key
    return not any(graph.nodes[child].get(nodes.NULLABLE, True) for child in children)


def position_sets(graph: nx.DiGraph, label: str, max_seq_len: int) -> tuple[frozenset, ...]:
    """For each position q < max_seq_len, a superset of the values `label` takes there."""
    values = frozenset(graph.nodes[label][nodes.VALUE_SET])
    by_position = graph.nodes[label].get(nodes.BY_POSITION)
    if by_position is not None:
        return tuple(frozenset(s) & values for s in by_position)
    if _counts_every_position(graph, label):
        return tuple(values & frozenset(range(q + 1, max_seq_len + 1)) for q in range(max_seq_len))
    return (values,) * max_seq_len


def occurring_pairs(graph: nx.DiGraph, label: str, max_seq_len: int) -> frozenset | None:
    """The (x, y) input pairs of two-input lookup `label` that occur at some position, or None
    when that would take more than `MAX_PAIRS` pairs to enumerate."""
    _, (fst, snd) = g.operation(graph, label)
    xs, ys = position_sets(graph, fst, max_seq_len), position_sets(graph, snd, max_seq_len)
    if sum(len(a) * len(b) for a, b in zip(xs, ys)) > MAX_PAIRS:
        return None
    return frozenset((x, y) for a, b in zip(xs, ys) for x in a for y in b)


def _is_lookup(graph: nx.DiGraph, label: str) -> bool:
    """A SequenceMap lowered to a two-input lookup table (two distinct categorical inputs)."""
    if graph.nodes[label][nodes.KIND] is not g.NodeKind.SEQUENCE_MAP:
        return False
    _, inputs = g.operation(graph, label)
    return len(set(inputs)) == 2 and not any(rasp.is_numerical(graph.nodes[i][nodes.EXPR]) for i in inputs)


def prune_tables(graph: nx.DiGraph) -> nx.DiGraph:
    """A copy of `graph` whose two-input lookups record the input pairs that can occur."""
    graph = graph.copy()
    tokens = graph.nodes["tokens"].get(nodes.BY_POSITION) if "tokens" in graph else None
    if tokens is None:
        return graph  # value inference has not run
    max_seq_len = len(tokens)  # tokens have a set per position
    for label in g.sop_nodes(graph):
        if not _is_lookup(graph, label):
            continue
        _, (fst, snd) = g.operation(graph, label)
        total = len(graph.nodes[fst][nodes.VALUE_SET]) * len(graph.nodes[snd][nodes.VALUE_SET])
        pairs = occurring_pairs(graph, label, max_seq_len)
        if pairs is None or len(pairs) >= total:
            continue
        graph.nodes[label][nodes.TABLE_PAIRS] = pairs
        graph.graph[nodes.APPLIED] = tuple(graph.graph.get(nodes.APPLIED, ())) + (
            f"prune_tables: the lookup table of {label} keeps {len(pairs)} of its {total} "
            f"({fst}, {snd}) rows, those that occur at some position",
        )
    return graph
