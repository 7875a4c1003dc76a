"""Fold a categorical-input `Map` into the attention heads that read it.

A head compares one-hot query and key values through `W_QK` and copies one-hot values through
`W_OV`. When a `Map(f, X)` over a categorical `X` is read only by heads, each head can read `X`
instead and apply `f` inside its own matrices:

- as a selector's keys or queries: `W_QK[q, x] = predicate(f(x), q)` (likewise for queries);
- as an Aggregate's values: `W_OV` sends `X = x` to `f(x)` (a one-hot for a categorical
  Aggregate, the number `f(x)` for a numerical one).

Both are exact: the unfolded head reads the one-hot of `f(x)`, which is what the folded matrix
computes row by row. A value `x` with `f(x) is None` has no direction in the unfolded model, so
its folded row is zero (never selected, copies nothing), as before. The fold removes the Map's
MLP (often a whole layer) and its residual directions; the Map's label stays on the heads that
absorbed it (`nodes.FOLDED_MAPS` on the head's node, listed by the model summary).

The pass is pure: it returns a new graph. Lowering applies the recorded folds through
`fold_leaves` (for `W_QK`) and `value_map` (for `W_OV`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import networkx as nx
import numpy as np

from compiler.passes import graph as g
from compiler.passes import nodes, selectors
from craft.bases import BasisDirection, VectorSpaceWithBasis
from craft.maps import LinearMap
from rasp import rasp


@dataclasses.dataclass(frozen=True)
class FoldedMap:
    """A Map absorbed by a head: its label, the s-op it read, its function and its roles."""

    label: str
    inner: str
    fn: Callable[[Any], Any]
    roles: tuple[str, ...]  # subset of ("keys", "queries", "values")


def _roles(graph: nx.DiGraph, label: str, head: str) -> tuple[str, ...] | None:
    """How attention node `head` reads `label`; None when `head` is no attention node."""
    node = graph.nodes[head]
    if not node[nodes.KIND].attention:
        return None
    expr = node[nodes.EXPR]
    roles = []
    leaves = selectors.conjunction(expr.selector)
    if any(leaf.keys == label for leaf in leaves):
        roles.append("keys")
    if any(leaf.queries == label for leaf in leaves):
        roles.append("queries")
    if node[nodes.KIND] is g.NodeKind.AGGREGATE and expr.sop.label == label:
        roles.append("values")
    return tuple(roles)


def _negated_reader(graph: nx.DiGraph, label: str, head: str) -> bool:
    """Whether a leaf of `head`'s selector reading `label` selects None positions."""
    leaves = selectors.conjunction(graph.nodes[head][nodes.EXPR].selector)
    return any(
        label in (leaf.keys, leaf.queries) and selectors.selects_none(leaf.predicate) for leaf in leaves
    )


def foldable_heads(graph: nx.DiGraph, label: str) -> tuple[str, ...]:
    """The heads that would absorb Map `label`, or `()` when it cannot be folded."""
    node = graph.nodes[label]
    if node[nodes.KIND] is not g.NodeKind.MAP or label in graph.graph[nodes.SINKS]:
        return ()
    _, (inner,) = g.operation(graph, label)
    if rasp.is_numerical(graph.nodes[inner][nodes.EXPR]):
        return ()  # a discretising MLP: a head cannot compare numbers by value
    heads = g.consumers(graph, label)
    if not heads:
        return ()
    for head in heads:
        roles = _roles(graph, label, head)
        if not roles:
            return ()
        if ("keys" in roles or "queries" in roles) and rasp.is_numerical(node[nodes.EXPR]):
            return ()  # refused by validation anyway; keep the error there
        if node.get(nodes.NULLABLE) and _negated_reader(graph, label, head):
            return ()  # a negated leaf selects the Map's None positions, which folding hides
    return tuple(heads)


def fold_maps_into_attention(graph: nx.DiGraph) -> nx.DiGraph:
    """A copy of `graph` in which every Map read only by attention heads is folded into them."""
    graph = graph.copy()
    for label in g.sop_nodes(graph):
        heads = foldable_heads(graph, label)
        if not heads:
            continue
        fn, (inner,) = g.operation(graph, label)
        for head in heads:
            node = graph.nodes[head]
            head_roles = _roles(graph, label, head)
            assert head_roles is not None, head  # foldable_heads returns attention heads only
            folded = FoldedMap(label, inner, fn, head_roles)
            inputs = g.node_inputs(graph, head)
            node[nodes.INPUTS] = tuple(sorted({inner if i == label else i for i in inputs}))
            node[nodes.FOLDED_MAPS] = {**node.get(nodes.FOLDED_MAPS, {}), label: folded}
        for succ in list(graph.successors(label)):
            graph.add_edge(inner, succ)
        graph.remove_node(label)
        roles = sorted({r for h in heads for r in graph.nodes[h][nodes.FOLDED_MAPS][label].roles})
        graph.graph[nodes.APPLIED] = tuple(graph.graph.get(nodes.APPLIED, ())) + (
            f"fold_maps: Map {label} (of {inner}) folded into the {'/'.join(roles)} of head(s) "
            f"{', '.join(heads)}",
        )
    return graph


@dataclasses.dataclass(frozen=True)
class FoldedPredicate:
    """`predicate(fk(key), fq(query))` for a head that reads folded Maps' inputs (`None` for a
    side without a folded Map). A side whose Map gives None has no direction in the unfolded
    model, so it is never selected."""

    predicate: Callable[[Any, Any], bool]
    fk: Callable[[Any], Any] | None
    fq: Callable[[Any], Any] | None

    def __call__(self, key: Any, query: Any) -> bool:
        if self.fk is not None:
            key = self.fk(key)
        if self.fq is not None:
            query = self.fq(query)
        if key is None or query is None:
            return False
        return self.predicate(key, query)


def fold_leaves(
    leaves: tuple[selectors.Leaf, ...], folds: Mapping[str, FoldedMap]
) -> tuple[selectors.Leaf, ...]:
    """Leaves over the folded Maps' inputs, their predicates composed with the Maps."""
    result = []
    for leaf in leaves:
        fk = folds[leaf.keys] if leaf.keys in folds else None
        fq = folds[leaf.queries] if leaf.queries in folds else None
        if fk is None and fq is None:
            result.append(leaf)
            continue
        result.append(
            selectors.Leaf(
                keys=fk.inner if fk else leaf.keys,
                queries=fq.inner if fq else leaf.queries,
                predicate=FoldedPredicate(leaf.predicate, fk.fn if fk else None, fq.fn if fq else None),
                negated=leaf.negated,
            )
        )
    return tuple(result)


def value_map(
    inner_space: VectorSpaceWithBasis, output_space: VectorSpaceWithBasis, fn: Callable, numerical: bool
) -> LinearMap:
    """`W_OV` from the folded Map's input one-hot to what the Aggregate writes of `fn(x)`."""
    matrix = np.zeros((inner_space.num_dims, output_space.num_dims))
    name = output_space.basis[0].name if output_space.num_dims else ""
    for row, direction in enumerate(inner_space.basis):
        value = fn(direction.value)
        if value is None:
            continue  # no direction for None: the head copies nothing
        if numerical:
            matrix[row, 0] = float(value)
        else:
            target = BasisDirection(name, value)
            if target in output_space:
                matrix[row, output_space.index(target)] = 1.0
    return LinearMap(inner_space, output_space, matrix)
