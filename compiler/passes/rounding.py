"""Merge float-rounding twins in the categorical copies the compiler inserts.

Float64 arithmetic can turn one real number into two neighbouring floats: a mean of means summed
in two orders gives -0.6666666666666667 at one input and -0.6666666666666666 at another. Value
inference keeps both. A categorical copy of such a numerical s-op (`compiler.passes.discretise`'s
one-hot input of a lookup, a head or a categorical Aggregate, and `compiler.passes.readout`'s
read-out of an output that can be None) then needs a separate value for each, which a float32
model cannot tell apart, so validation used to refuse the program.

The copy does not need them apart when every reader gets the same result from both twins: this
pass checks each reader on the inferred values and, where it holds, lets the copy write one
representative for the whole group (`TwinMerge`, the shortest-printing twin). It holds when

* the reader is a `SequenceMap` or `Select` whose function / predicate returns equal results
  (`==`, same type) for every twin, whatever the other argument's value: the reader's result,
  and so everything after it, is the evaluator's own; or
* the reader is an output of the program that nothing else reads (the copy itself as a
  read-out, a categorical Aggregate copying it, or a SequenceMap whose numerical results differ
  by float rounding only): the model then outputs a number that differs from the evaluator's by
  float64 rounding (relative 1e-9 at most), less than a float32 output's own rounding error.

Twins are neighbouring values at most `numerical_mlp.TARGET_TOLERANCE` apart relative to their
size (at least 1). A group whose readers do not all pass stays as it is (validation refuses
with the two values). The pass costs nothing in the model: the copy loses values.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Collection, Iterable
from typing import Any

import networkx as nx

from compiler.passes import nodes
from compiler.passes.discretise import rebuild, walk
from craft.chamber.numerical_mlp import TARGET_TOLERANCE
from rasp import rasp


@dataclasses.dataclass(frozen=True)
class TwinMerge:
    """A categorical copy's function that sends every float-rounding twin to its group's
    representative and leaves every other value as it is. `pairs`: (twin, representative)."""

    pairs: tuple[tuple[Any, Any], ...]

    @functools.cached_property
    def _table(self) -> dict[Any, Any]:
        return dict(self.pairs)

    def __call__(self, x: Any) -> Any:
        return self._table.get(x, x) if _is_number(x) else x

    def __repr__(self) -> str:
        return f"TwinMerge({len(self.pairs)} float-rounding twins)"


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def twin_groups(values: Iterable[Any]) -> list[tuple[Any, ...]]:
    """Groups (two or more values) of numbers within float rounding of each other, ascending.

    A group's span stays within `TARGET_TOLERANCE` of its size, so chains never drift.
    """
    numbers = sorted({v for v in values if _is_number(v) and math.isfinite(v)})
    groups, current = [], numbers[:1]
    for x in numbers[1:]:
        if x - current[0] <= TARGET_TOLERANCE * max(1.0, abs(current[0]), abs(x)):
            current.append(x)
            continue
        if len(current) > 1:
            groups.append(tuple(current))
        current = [x]
    if len(current) > 1:
        groups.append(tuple(current))
    return groups


def representative(group: tuple[Any, ...]) -> Any:
    """The twin that prints shortest (0.12 rather than 0.12000000000000002), then the smallest."""
    return min(group, key=lambda v: (len(repr(v)), v))


def merge_rounding_twins(
    program: rasp.RASPExpr, graph: nx.DiGraph, copy_functions: Collection[Callable[[Any], Any]]
) -> rasp.RASPExpr:
    """`program` whose categorical copies (Maps whose function is one of `copy_functions`) send
    float-rounding twins to one value wherever every reader allows it (module docstring);
    `program` itself when none does.

    Args:
      program: the program after the other value-dependent rewrites.
      graph: its traced graph with inferred values.
      copy_functions: the identity functions the compiler's copies use.
    """
    if not isinstance(program, rasp.RASPExpr):
        return program
    merges: dict[str, TwinMerge] = {}
    for label in graph.nodes:
        expr = graph.nodes[label][nodes.EXPR]
        if not (isinstance(expr, rasp.Map) and expr.f in copy_functions and rasp.is_categorical(expr)):
            continue
        pairs = [
            (twin, representative(group))
            for group in twin_groups(graph.nodes[expr.inner.label][nodes.VALUE_SET])
            if _readers_allow(graph, label, group)
            for twin in group
            if twin != representative(group)
        ]
        if pairs:
            merges[label] = TwinMerge(tuple(pairs))
    if not merges:
        return program
    replaced: dict[int, rasp.RASPExpr] = {}

    def current(expr: rasp.RASPExpr) -> rasp.RASPExpr:
        return replaced.get(id(expr), expr)

    for expr in walk(program):
        if isinstance(expr, rasp.Map) and expr.f in copy_functions and expr.label in merges:
            merged = rasp.Map(merges[expr.label], current(expr.inner), simplify=False)
            replaced[id(expr)] = rasp.annotate(merged, **dict(expr.annotations))
        elif any(id(child) in replaced for child in expr.children):
            replaced[id(expr)] = rebuild(expr, current)
    return current(program)


def _readers_allow(graph: nx.DiGraph, label: str, group: tuple[Any, ...]) -> bool:
    """Whether every reader of the copy `label` gives the twins of `group` the same result."""
    readers = list(graph.successors(label))
    if not readers:
        return _lone_output(graph, label)
    return all(_reader_allows(graph, reader, label, group) for reader in readers)


def _lone_output(graph: nx.DiGraph, label: str) -> bool:
    """An output of the program that no other expression reads."""
    return label in graph.graph[nodes.SINKS] and not any(True for _ in graph.successors(label))


def _reader_allows(graph: nx.DiGraph, reader: str, label: str, group: tuple[Any, ...]) -> bool:
    expr = graph.nodes[reader][nodes.EXPR]
    if isinstance(expr, rasp.Aggregate):  # a categorical Aggregate copies the value it reads
        return expr.sop.label == label and _lone_output(graph, reader)
    if isinstance(expr, rasp.SequenceMap):
        args, fn, loose = (expr.fst, expr.snd), expr.f, _lone_output(graph, reader)
    elif isinstance(expr, rasp.Select):
        predicate = expr.predicate
        args, loose = (expr.keys, expr.queries), False

        def fn(key: Any, query: Any) -> bool:  # the evaluator reads a predicate's truth value
            return bool(predicate(key, query))
    else:
        return False
    for position, arg in enumerate(args):
        if arg.label != label:
            continue
        other = args[1 - position].label
        for value in graph.nodes[other][nodes.VALUE_SET]:
            if not _same_results(fn, group, value, position, loose):
                return False
    return True


def _same_results(fn: Callable[..., Any], group: tuple[Any, ...], other: Any, position: int, loose: bool) -> bool:
    """Whether `fn` gives every twin of `group` (at argument `position`, `other` at the other)
    the same result: equal and of one type, or, when `loose`, numbers within float rounding."""
    try:
        results = [fn(twin, other) if position == 0 else fn(other, twin) for twin in group]
    except Exception:  # noqa: BLE001 - a user function that raises decides nothing here
        return False
    first = results[0]
    for result in results[1:]:
        if type(result) is type(first) and result == first:
            continue
        if loose and _is_number(first) and _is_number(result) and math.isfinite(first) and (
            abs(result - first) <= TARGET_TOLERANCE * max(1.0, abs(first))
        ):
            continue
        return False
    return True
