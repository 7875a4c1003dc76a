"""Per-position value sets: a tighter, still sound, value inference for position-structured s-ops.

The plain inference (`compiler.passes.values`) gives every s-op one value set for all positions. That
overcounts when values are tied to their position: `frac_prevs` at position q is k / (q + 1), so
the difference of two such fractions has denominator q + 1 too, while combining the two global
sets pairs every denominator with every other (384,089 values at length 50 instead of ~2,500).

Here an s-op may carry `BY_POSITION`: a tuple holding, for each position q < max_seq_len, a set
containing every value it takes at position q on every input (of any length). Rules:

* `tokens`: the vocabulary at every position; `indices`: {q}; `Full` / constants: their value.
* `Map`: f applied position-wise; `SequenceMap` / `LinearSequenceMap`: f on the pairs of values
  at the same position (the diagonal when both inputs are one s-op).
* `Aggregate` whose selector compares `indices` with `indices` only: the keys it selects at query
  q on an input of length n are a fixed set K(q, n) = {k < n : selected(k, q)}; the value is the
  mean of one value per key of K (numerical; sums taken in key order, the float operations the
  evaluator performs) or any of their values (categorical), and the default when K is empty. A
  causal model selects K(q, q + 1), one of the same sets, so the result holds causally too.

Anything else has no per-position structure (None) and keeps the plain inference. A rule that
would need more work than its budget also returns None, so the plain inference (and its limits)
decides.

Types are the evaluator's, as in the plain inference: the per-position sets hold one
representative per equality class, and the values that occur with several types are gathered
for the whole s-op (`compiler.passes.variants`); functions are called on every variant.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import networkx as nx
import numpy as np

from compiler.errors import UnsupportedProgramError
from compiler.passes import graph as g
from compiler.passes import nodes, selectors, sums
from compiler.passes.arithmetic import linear_values
from compiler.passes.variants import NO_VARIANTS, Collector, Variants, results
from craft.bases import INDICES_NAME
from rasp import rasp

PositionSets = tuple[frozenset, ...]
# Per-position sets, nullability and the s-op's variants (`compiler.passes.variants`).
Positional = tuple[PositionSets, bool, dict]

# Most (x, y) pairs a position-wise SequenceMap rule enumerates (summed over positions).
MAX_PAIRS = 4_000_000
# Most distinct values one position-wise sum (or the union of an s-op's positions) may hold.
MAX_VALUES = 100_000
# Most partial sums the Aggregate rule builds in total.
MAX_SUM_WORK = 20_000_000


def infer_positional(
    graph: nx.DiGraph, node: dict, vocab: frozenset, max_seq_len: int, call: Callable
) -> Positional | None:
    """Per-position value sets, nullability and variants of one s-op node, or None (no
    structure).

    `call(expr, f, args)` evaluates a user function with the plain inference's error handling.
    """
    expr, kind = node[nodes.EXPR], node[nodes.KIND]
    L = max_seq_len
    if kind is g.NodeKind.TOKENS:
        return (frozenset(vocab),) * L, False, {}
    if kind is g.NodeKind.INDICES:
        return tuple(frozenset({q}) for q in range(L)), False, {}
    if kind is g.NodeKind.FULL:
        return (frozenset({expr.fill} - {None}),) * L, expr.fill is None, {}
    if kind is g.NodeKind.MAP:
        inner = _positions(graph, expr.inner.label)
        if inner is None:
            return None
        return _map(expr, inner, graph.nodes[expr.inner.label], call)
    if kind is g.NodeKind.SEQUENCE_MAP and sums.is_sum(expr):
        return None  # the plain inference enumerates sums, not products of means
    if kind in (g.NodeKind.SEQUENCE_MAP, g.NodeKind.LINEAR_SEQUENCE_MAP):
        fst, snd = _positions(graph, expr.fst.label), _positions(graph, expr.snd.label)
        if fst is None or snd is None:
            return None
        return _sequence_map(expr, fst, snd, graph.nodes[expr.fst.label], graph.nodes[expr.snd.label], call)
    if kind is g.NodeKind.AGGREGATE:
        return _aggregate(graph, expr, L)
    return None


def _positions(graph: nx.DiGraph, label: str) -> PositionSets | None:
    return graph.nodes[label].get(nodes.BY_POSITION)


def _variants(node: dict) -> Variants:
    return node.get(nodes.VARIANTS) or NO_VARIANTS


def _map(expr: rasp.Map, inner: PositionSets, inner_node: dict, call: Callable) -> Positional:
    variants = _variants(inner_node)
    found = Collector()
    nullable = inner_node[nodes.NULLABLE]
    first: dict = {}
    for x in set().union(*inner):
        if variants and x in variants:
            ys = results(expr.label, (expr.inner.label,), (x,), (variants[x],), lambda args: call(expr, expr.f, args))
        else:
            ys = [call(expr, expr.f, (x,))]
        first[x] = ys[0]
        for y in ys:
            if y is None:
                nullable = True
            else:
                found.add(y)
    return tuple(frozenset(first[x] for x in xs) - {None} for xs in inner), nullable, found.variants


def _sequence_map(
    expr: rasp.SequenceMap, fst: PositionSets, snd: PositionSets, fst_node: dict, snd_node: dict, call: Callable
) -> Positional | None:
    same = expr.fst.label == expr.snd.label
    if not same and sum(len(a) * len(b) for a, b in zip(fst, snd)) > MAX_PAIRS:
        return None
    nullable = fst_node[nodes.NULLABLE] or snd_node[nodes.NULLABLE]
    x_variants, y_variants = _variants(fst_node), _variants(snd_node)
    labels = (expr.fst.label, expr.snd.label)
    found = Collector()
    cache: dict[tuple, Any] = {}

    def f(x: Any, y: Any) -> Any:
        key = (x, y)
        if key not in cache:
            if len(cache) >= MAX_VALUES:
                raise _Budget
            x_options = x_variants.get(x) if x_variants else None
            y_options = None if same else (y_variants.get(y) if y_variants else None)
            if x_options is None and y_options is None:
                zs = [call(expr, expr.f, (x, y))]
            else:
                zs = results(expr.label, labels, key, (x_options, y_options),
                             lambda args: call(expr, expr.f, args), diagonal=same)
            for z in zs:
                if z is not None:
                    found.add(z)
            cache[key] = zs[0]
        return cache[key]

    linear = expr if isinstance(expr, rasp.LinearSequenceMap) else None
    sets = []
    try:
        for a, b in zip(fst, snd):
            if same:
                values = {f(x, x) for x in a}
            elif linear is not None and (blocks := linear_values(linear.fst_fac, linear.snd_fac, a, b, False)) is not None:
                values = set()
                for kind, block in blocks:
                    values.update(block)
                    found.add_all(block, kind)
                values.update(f(x, y) for x in a if x in x_variants for y in b)  # a variant: f on each
                values.update(f(x, y) for y in b if y in y_variants for x in a)
            else:
                values = {f(x, y) for x in a for y in b}
            nullable = nullable or None in values
            sets.append(frozenset(values - {None}))
    except _Budget:
        return None
    if len(set().union(*sets)) > MAX_VALUES:
        return None
    return tuple(sets), nullable, found.variants


class _Budget(Exception):
    """A positional rule ran past its budget; the plain inference decides instead."""


def _numbers(values: frozenset) -> bool:
    return all(isinstance(v, (bool, int, float, np.integer, np.floating)) for v in values)


def _selected_sets(graph: nx.DiGraph, expr: rasp.Aggregate, L: int) -> list[set[tuple[int, ...]]] | None:
    """For each query q, every key set the selector can select (over input lengths n > q)."""
    try:
        leaves = selectors.conjunction(expr.selector)
    except UnsupportedProgramError:
        return None
    if not leaves or any(leaf.keys != INDICES_NAME or leaf.queries != INDICES_NAME for leaf in leaves):
        return None
    table = np.ones((L, L), dtype=bool)
    try:
        for leaf in leaves:
            table &= np.array([[bool(leaf.predicate(k, q)) for k in range(L)] for q in range(L)])
    except Exception:
        return None
    found = []
    for q in range(L):
        keys = np.flatnonzero(table[q])
        found.append({tuple(int(k) for k in keys[keys < n]) for n in range(q + 1, L + 1)})
    return found


def _aggregate(graph: nx.DiGraph, expr: rasp.Aggregate, L: int) -> Positional | None:
    values = _positions(graph, expr.sop.label)
    if values is None:
        return None
    candidates = _selected_sets(graph, expr, L)
    if candidates is None:
        return None
    sop_node = graph.nodes[expr.sop.label]
    sop_nullable = sop_node[nodes.NULLABLE]
    default = expr.default
    empty = any(() in sets for sets in candidates)
    found = Collector()
    if rasp.is_numerical(expr):
        if sop_nullable or not all(_numbers(v) for v in values):
            return None  # the plain inference and validation report it
        try:
            per_query = _numerical_means(values, candidates)
        except _Budget:
            return None
        for means in per_query:  # `sum(...) / len(...)`: floats
            found.add_all(means, float)
    else:
        per_query = [set().union(*(values[k] for keys in sets for k in keys)) for sets in candidates]
        found.add_variants(set().union(*per_query), _variants(sop_node))  # the selected value itself
    sets = []
    for q, selected in enumerate(per_query):
        if () in candidates[q] and default is not None:
            selected = selected | {default}
            found.add(default)
        sets.append(frozenset(selected))
    nullable = (empty and default is None) or (sop_nullable and not rasp.is_numerical(expr))
    if len(set().union(*sets)) > MAX_VALUES:
        return None
    return tuple(sets), nullable, found.variants


def _numerical_means(values: PositionSets, candidates: list[set[tuple[int, ...]]]) -> list[set]:
    """Means of one value per selected key, summed in key order like the evaluator."""
    as_arrays = [np.array(sorted({float(v) for v in vs})) for vs in values]
    sums: dict[tuple[int, ...], np.ndarray] = {(): np.zeros(1)}
    work = 0

    def sums_of(keys: tuple[int, ...]) -> np.ndarray:
        nonlocal work
        missing, known = [], keys
        while known not in sums:
            missing.append(known)
            known = known[:-1]
        for prefix in reversed(missing):
            previous, base = sums[prefix[:-1]], as_arrays[prefix[-1]]
            work += previous.size * base.size
            if work > MAX_SUM_WORK:
                raise _Budget
            table = np.unique((previous[:, None] + base[None, :]).ravel())
            if table.size > MAX_VALUES:
                raise _Budget
            sums[prefix] = table
        return sums[keys]

    means = []
    for sets in candidates:
        found: set = set()
        for keys in sorted(sets):
            if keys:
                found.update((sums_of(keys) / len(keys)).tolist())
        means.append(found)
    return means
