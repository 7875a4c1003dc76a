"""Merge common subexpressions: two expressions computing the same thing become one.

Two s-ops (or selectors) are the same computation when they are the same kind of operation with
the same parameters over the same (already merged) children and carry the same annotations apart
from their names (so the same encoding). Functions and predicates are compared as values:

- the same object, or an equal hashable one (a `Comparison`, a frozen dataclass);
- or two Python functions with the same code, the same module globals, equal defaults and closures
  holding the same objects or equal plain constants (numbers, strings, tuples of them) — e.g. the
  two lambdas a library helper creates when it is called twice with the same arguments.

RASP functions are pure (value inference and the evaluator call them freely), so one copy of
each computation gives the same outputs. Merging removes the duplicate's block and its residual
directions, and every reader of the duplicate reads the kept one (the first in a children-first
walk of the program).

This pass rewrites the RASP program before tracing, so that every later pass (value inference
included) sees one node per computation; it returns the rewritten program and one line per merge.
"""

from __future__ import annotations

import dataclasses
import enum
import types
from collections.abc import Hashable
from typing import Any, cast

from compiler.passes.discretise import rebuild, walk
from compiler.passes.outputs import Outputs, Root, as_root, programs_of
from rasp import rasp

PLAIN = (type(None), bool, int, float, complex, str, bytes)


def _plain(value: Any) -> bool:
    if isinstance(value, (tuple, frozenset)):
        return all(_plain(v) for v in value)
    return type(value) in PLAIN


def _value_key(value: Any) -> Hashable:
    """Equal keys for values that behave the same: equal plain constants, enum members and
    frozen dataclasses; any other object only equals itself (its `==` may mean something else,
    e.g. an s-op's `==` builds a new s-op)."""
    if _plain(value):
        return ("plain", type(value).__name__, repr(value))
    # Every dataclass instance has `__dataclass_params__` (typeshed's `DataclassInstance` omits it).
    frozen = dataclasses.is_dataclass(value) and not isinstance(value, type) and cast(Any, value).__dataclass_params__.frozen
    if isinstance(value, enum.Enum) or frozen:
        try:
            hash(value)
        except TypeError:
            return ("object", id(value))
        return ("value", type(value), value)
    return ("object", id(value))


def function_key(fn: Any) -> Hashable:
    """A key equal for two functions that compute the same (see the module docstring)."""
    if not isinstance(fn, types.FunctionType):
        return _value_key(fn)
    closure = tuple(_value_key(cell.cell_contents) for cell in fn.__closure__ or ())
    defaults = tuple(_value_key(d) for d in fn.__defaults__ or ())
    kwdefaults = tuple(sorted((k, _value_key(v)) for k, v in (fn.__kwdefaults__ or {}).items()))
    return ("function", fn.__code__, id(fn.__globals__), defaults, kwdefaults, closure)


def _parameters(expr: rasp.RASPExpr) -> Hashable | None:
    """The operation's own parameters (besides its children); None: never merged."""
    if isinstance(expr, rasp.LinearSequenceMap):
        return (_value_key(expr.fst_fac), _value_key(expr.snd_fac))
    if isinstance(expr, (rasp.SequenceMap, rasp.Map)):
        return function_key(expr.f)
    if isinstance(expr, (rasp.Aggregate, rasp.SumAggregate)):
        return _value_key(expr.default)
    if isinstance(expr, rasp.Select):
        return function_key(expr.predicate)
    if isinstance(expr, (rasp.SelectorWidth, rasp.SelectorAnd, rasp.SelectorOr, rasp.SelectorNot)):
        return ()
    if isinstance(expr, (rasp.TokensType, rasp.IndicesType, rasp.LengthType)):
        return ()
    if isinstance(expr, rasp.Full):
        return _value_key(expr.fill)
    if isinstance(expr, rasp.ConstantSOp):
        return (_value_key(tuple(expr.value)), expr.check_length)
    if isinstance(expr, rasp.ConstantSelector):
        return (_value_key(tuple(tuple(row) for row in expr.value)), expr.check_length)
    return None


def _key(expr: rasp.RASPExpr) -> Hashable | None:
    parameters = _parameters(expr)
    if parameters is None:
        return None
    annotations = tuple(sorted((k, _value_key(v)) for k, v in expr.annotations.items() if k != "name"))
    return (type(expr), parameters, tuple(id(child) for child in expr.children), annotations)


def merge_common(program: Root) -> tuple[Root, tuple[str, ...]]:
    """`program` with duplicate computations merged, and one line per merged expression."""
    if not isinstance(program, rasp.RASPExpr):
        return program, ()
    replaced: dict[int, rasp.RASPExpr] = {}
    first: dict[Hashable, rasp.RASPExpr] = {}
    merged: list[str] = []

    def current(expr: rasp.RASPExpr) -> rasp.RASPExpr:
        return replaced.get(id(expr), expr)

    outputs = {id(output) for output in programs_of(program)} if isinstance(program, Outputs) else set()
    for expr in walk(program):
        new = rebuild(expr, current) if any(id(c) in replaced for c in expr.children) else expr
        # Each program compiled side by side keeps its own output, even when two compute the same.
        key = _key(new) if id(expr) not in outputs else None
        kept = first.setdefault(key, new) if key is not None else new
        if kept is not new:
            merged.append(
                f"merge_common: {expr.label} computes the same as {kept.label} (same operation of "
                f"the same inputs); its readers read {kept.label}"
            )
        if kept is not expr:
            replaced[id(expr)] = kept
    return as_root(current(program)), tuple(merged)
