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
  (`==`, same type) for every twin, whatever the other argument's value (for a `SequenceMap`
  reading the copy twice, `f(x, x)`, for the twin itself: that is the only pair it evaluates):
  the reader's result, and so everything after it, is the evaluator's own; or
* the reader is an output of the program that nothing else reads (the copy itself as a
  read-out, a categorical Aggregate copying it, or a SequenceMap whose numerical results differ
  by float rounding only): the model then outputs a number that differs from the evaluator's by
  float64 rounding (relative 1e-9 at most), less than a float32 output's own rounding error; or
* the reader is a SequenceMap whose results for the twins are twins again (one group of its
  own value set) and whose only readers are copies that may merge that group in turn (decided
  the same way, on the values before any merge), e.g. `x + y` read out through the copy of an
  output that can be None.

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
from compiler.passes.discretise import as_sop, rebuild, walk
from compiler.passes.outputs import Root, as_root
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
    program: Root, graph: nx.DiGraph, copy_functions: Collection[Callable[[Any], Any]]
) -> Root:
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
    readers = _Readers(graph, tuple(copy_functions))
    merges: dict[str, TwinMerge] = {}
    for label in graph.nodes:
        if not readers.is_copy(label):
            continue
        pairs = [
            (twin, representative(group))
            for group in readers.groups(graph.nodes[label][nodes.EXPR].inner.label)
            if readers.allow(label, group)
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
            merged = rasp.Map(merges[expr.label], as_sop(current(expr.inner)), simplify=False)
            replaced[id(expr)] = rasp.annotate(merged, **dict(expr.annotations))
        elif any(id(child) in replaced for child in expr.children):
            replaced[id(expr)] = rebuild(expr, current)
    return as_root(current(program))


class _Readers:
    """Which twin groups each copy may merge, decided on the graph before any merge (so every
    s-op's value set still holds both twins and the results they lead to)."""

    def __init__(self, graph: nx.DiGraph, copy_functions: tuple[Callable[[Any], Any], ...]) -> None:
        self.graph, self.copy_functions = graph, copy_functions
        self._groups: dict[str, list[tuple[Any, ...]]] = {}
        self._group_of: dict[str, dict[Any, tuple[Any, ...]]] = {}
        self._allowed: dict[tuple[str, tuple[Any, ...]], bool] = {}

    def is_copy(self, label: str) -> bool:
        expr = self.graph.nodes[label][nodes.EXPR]
        return isinstance(expr, rasp.Map) and expr.f in self.copy_functions and rasp.is_categorical(expr)

    def groups(self, label: str) -> list[tuple[Any, ...]]:
        if label not in self._groups:
            self._groups[label] = twin_groups(self.graph.nodes[label][nodes.VALUE_SET])
        return self._groups[label]

    def group_of(self, label: str, value: Any) -> tuple[Any, ...] | None:
        """The twin group of `label`'s values holding `value` (groups are disjoint), if any.

        Indexed once per s-op: a reader is asked this for every value of its other input, and
        scanning every group each time made validation quadratic in large value sets."""
        if label not in self._group_of:
            self._group_of[label] = {twin: group for group in self.groups(label) for twin in group}
        return self._group_of[label].get(value)

    def allow(self, copy: str, group: tuple[Any, ...]) -> bool:
        """Whether every reader of the copy `copy` gives the twins of `group` the same result."""
        key = (copy, group)
        if key not in self._allowed:
            readers = list(self.graph.successors(copy))
            self._allowed[key] = (
                all(self._reader_allows(reader, copy, group) for reader in readers)
                if readers else self.lone_output(copy)
            )
        return self._allowed[key]

    def lone_output(self, label: str) -> bool:
        """An output of the program that no other expression reads."""
        return label in self.graph.graph[nodes.SINKS] and not any(True for _ in self.graph.successors(label))

    def _reader_allows(self, reader: str, copy: str, group: tuple[Any, ...]) -> bool:
        expr = self.graph.nodes[reader][nodes.EXPR]
        if isinstance(expr, rasp.Aggregate):  # a categorical Aggregate copies the value it reads
            return expr.sop.label == copy and self.lone_output(reader)
        if isinstance(expr, rasp.SequenceMap):
            args, fn = (expr.fst, expr.snd), expr.f
        elif isinstance(expr, rasp.Select):
            predicate = expr.predicate
            args = (expr.keys, expr.queries)

            def fn(key: Any, query: Any) -> bool:  # the evaluator reads a predicate's truth value
                return bool(predicate(key, query))
        else:
            return False
        if isinstance(expr, rasp.SequenceMap) and expr.fst.label == expr.snd.label == copy:
            # f(x, x) pairs each value with itself only (value inference's diagonal), so the
            # twins need equal results f(t, t), not f(t, v) for every value v
            try:
                results = [fn(twin, twin) for twin in group]
            except Exception:
                return False
            return self._same(reader, results, False)
        for position, arg in enumerate(args):
            if arg.label != copy:
                continue
            for value in self.graph.nodes[args[1 - position].label][nodes.VALUE_SET]:
                try:
                    results = [fn(twin, value) if position == 0 else fn(value, twin) for twin in group]
                except Exception:
                    return False
                if not self._same(reader, results, isinstance(expr, rasp.Select)):
                    return False
        return True

    def _same(self, reader: str, results: list[Any], selector: bool) -> bool:
        """Whether a reader's results for the twins of one group count as one result: equal and
        of one type; numbers within float rounding where the reader is a lone output; or twins
        themselves (all in one group of the reader's value set) where the reader is read only by
        copies that may merge that group."""
        first = results[0]
        if all(type(r) is type(first) and r == first for r in results[1:]):
            return True
        if selector or not all(_is_number(r) and math.isfinite(r) for r in results):
            return False
        if self.lone_output(reader):
            return max(results) - min(results) <= TARGET_TOLERANCE * max(1.0, *(abs(r) for r in results))
        group = self.group_of(reader, results[0])
        if group is None or not all(r in group for r in results[1:]):
            return False
        readers = list(self.graph.successors(reader))
        return bool(readers) and all(self.is_copy(r) and self.allow(r, group) for r in readers)
