"""The reference evaluator: the semantics every compiled model is checked against.

Each sub-expression is computed once per evaluation (memoised by identity) in an explicit
post-order walk, so deep programs do not hit Python's recursion limit. Selectors are numpy
boolean matrices indexed ``[query, key]`` internally and returned as nested lists.
"""

from __future__ import annotations

import abc
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rasp import expressions as rasp  # the expression classes, under the name users know
from rasp.comparison import without_none_check
from rasp.errors import RaspEvaluationError

SOpValue = list
SelectorValue = np.ndarray


class RASPEvaluator(abc.ABC):
    """Something that evaluates a RASP expression on an input sequence."""

    @abc.abstractmethod
    def evaluate(self, expr: rasp.RASPExpr, xs: Sequence[rasp.Value]) -> Any:
        """The value of ``expr`` on ``xs`` (a list for an s-op, rows of bools for a selector)."""


class DefaultRASPEvaluator(RASPEvaluator):
    """The reference semantics (this module); ``causal`` masks every selector."""

    def __init__(self, causal: bool = False) -> None:
        self.causal = causal

    def evaluate(self, expr: rasp.RASPExpr, xs: Sequence[rasp.Value], causal: bool | None = None) -> Any:
        return evaluate(expr, xs, causal=self.causal if causal is None else causal)


def evaluate(expr: rasp.RASPExpr, xs: Sequence[Any], causal: bool = False) -> list[Any]:
    """Evaluate ``expr`` on the input sequence ``xs`` (``rasp.evaluate``).

    Returns a list for an s-op and a list of query rows of booleans (``value[q][k]``) for a
    selector. With ``causal=True`` every selector is masked to keys at or before the query,
    as in a decoder-only transformer. Raises :class:`RaspEvaluationError` on failure.
    """
    if not isinstance(expr, rasp.RASPExpr):
        raise RaspEvaluationError(
            f"cannot evaluate an object of type {type(expr).__name__}: not a RASP expression"
        )
    value = _Evaluation(list(xs), causal).value_of(expr)
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


class _Evaluation:
    """One evaluation of a program on one input: the input, the mode and the memo table."""

    def __init__(self, xs: list[Any], causal: bool) -> None:
        self.xs = xs
        self.causal = causal
        self.memo: dict[int, Any] = {}

    def value_of(self, root: rasp.RASPExpr) -> Any:
        """Compute ``root`` after all its sub-expressions, each exactly once."""
        memo = self.memo
        stack = [root]
        while stack:
            node = stack[-1]
            if id(node) in memo:
                stack.pop()
                continue
            pending = [child for child in node.children if id(child) not in memo]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            memo[id(node)] = self._compute(node)
        return memo[id(root)]

    def _compute(self, expr: rasp.RASPExpr) -> Any:
        rule = _rule_for(expr)
        value = rule(self, expr)
        if self.causal and isinstance(expr, rasp.Selector):
            value = np.tril(value)
        return value

    def arg(self, expr: rasp.RASPExpr) -> Any:
        """The already computed value of a child expression."""
        return self.memo[id(expr)]


# ---------------------------------------------------------------------------------------------
# One rule per expression type


def _tokens(ev: _Evaluation, expr: rasp.TokensType) -> SOpValue:
    return list(ev.xs)


def _indices(ev: _Evaluation, expr: rasp.IndicesType) -> SOpValue:
    return list(range(len(ev.xs)))


def _length(ev: _Evaluation, expr: rasp.LengthType) -> SOpValue:
    return [len(ev.xs)] * len(ev.xs)


def _full(ev: _Evaluation, expr: rasp.Full) -> SOpValue:
    return [expr.fill] * len(ev.xs)


def _constant_sop(ev: _Evaluation, expr: rasp.ConstantSOp) -> SOpValue:
    if expr.check_length and len(expr.value) != len(ev.xs):
        raise RaspEvaluationError(
            f"ConstantSOp {expr.label!r} has {len(expr.value)} values {expr.value!r} but the "
            f"input has length {len(ev.xs)}; pass check_length=False to allow this"
        )
    return list(expr.value)


def _map(ev: _Evaluation, expr: rasp.Map) -> SOpValue:
    f = expr.f
    out: SOpValue = []
    for x in ev.arg(expr.inner):
        if x is None:
            out.append(None)
            continue
        try:
            out.append(f(x))
        except Exception as exc:
            raise RaspEvaluationError(
                f"Map {expr.label!r}: its function raised {type(exc).__name__} on value "
                f"{x!r}: {exc}"
            ) from exc
    return out


def _sequence_map(ev: _Evaluation, expr: rasp.SequenceMap) -> SOpValue:
    fst, snd = ev.arg(expr.fst), ev.arg(expr.snd)
    _check_same_length(expr, len(fst), len(snd))
    f = expr.f
    out: SOpValue = []
    for x, y in zip(fst, snd):
        if x is None or y is None:
            out.append(None)
            continue
        try:
            out.append(f(x, y))
        except Exception as exc:
            raise RaspEvaluationError(
                f"{type(expr).__name__} {expr.label!r}: its function raised "
                f"{type(exc).__name__} on values ({x!r}, {y!r}): {exc}"
            ) from exc
    return out


def _select(ev: _Evaluation, expr: rasp.Select) -> SelectorValue:
    keys, queries = ev.arg(expr.keys), ev.arg(expr.queries)
    predicate = without_none_check(expr.predicate)
    present_keys = [(ki, key) for ki, key in enumerate(keys) if key is not None]
    rows = []
    for query in queries:
        row = [False] * len(keys)
        if query is not None:
            for ki, key in present_keys:
                try:
                    row[ki] = bool(predicate(key, query))
                except Exception as exc:
                    raise RaspEvaluationError(
                        f"Select {expr.label!r}: predicate {expr.predicate!r} raised "
                        f"{type(exc).__name__} on key {key!r}, query {query!r}: {exc}"
                    ) from exc
        rows.append(row)
    return np.array(rows, dtype=bool).reshape(len(queries), len(keys))


def _constant_selector(ev: _Evaluation, expr: rasp.ConstantSelector) -> SelectorValue:
    n = len(ev.xs)
    rows = expr.value
    widths = {len(row) for row in rows}
    if len(widths) > 1:
        raise RaspEvaluationError(
            f"ConstantSelector {expr.label!r}: rows have different lengths {sorted(widths)}"
        )
    width = next(iter(widths), 0)
    if expr.check_length and (len(rows) != n or (rows and width != n)):
        raise RaspEvaluationError(
            f"ConstantSelector {expr.label!r} is {len(rows)}x{width} but the input has "
            f"length {n}; pass check_length=False to allow this"
        )
    return np.array(rows, dtype=bool).reshape(len(rows), width)


def _selector_binary(op: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable:
    def rule(ev: _Evaluation, expr: rasp.SelectorAnd | rasp.SelectorOr) -> SelectorValue:
        fst, snd = ev.arg(expr.fst), ev.arg(expr.snd)
        if fst.shape != snd.shape:
            raise RaspEvaluationError(
                f"{type(expr).__name__} {expr.label!r}: operand shapes differ "
                f"({fst.shape} vs {snd.shape})"
            )
        return op(fst, snd)

    return rule


def _selector_not(ev: _Evaluation, expr: rasp.SelectorNot) -> SelectorValue:
    return ~ev.arg(expr.inner)


def _selector_width(ev: _Evaluation, expr: rasp.SelectorWidth) -> SOpValue:
    return [int(count) for count in ev.arg(expr.selector).sum(axis=1)]


def _aggregate(ev: _Evaluation, expr: rasp.Aggregate) -> SOpValue:
    selector, values = ev.arg(expr.selector), ev.arg(expr.sop)
    _check_same_length(expr, selector.shape[1], len(values))
    combine = _mean if rasp.is_numerical(expr) else _common_value
    out = []
    for row in selector.tolist():
        chosen = [value for value, selected in zip(values, row) if selected]
        out.append(combine(expr, chosen) if chosen else expr.default)
    return out


def _sum_aggregate(ev: _Evaluation, expr: rasp.SumAggregate) -> SOpValue:
    selector, values = ev.arg(expr.selector), ev.arg(expr.sop)
    _check_same_length(expr, selector.shape[1], len(values))
    out = []
    for row in selector.tolist():
        chosen = [value for value, selected in zip(values, row) if selected]
        out.append(sum(_numbers(expr, chosen)) if chosen else expr.default)
    return out


def _loop_state(ev: _Evaluation, expr: rasp.LoopState) -> SOpValue:
    raise RaspEvaluationError(
        f"{expr.label!r} is the state of a Loop and has a value only inside it; evaluate the "
        "Loop, not an expression of its body"
    )


def _loop(ev: _Evaluation, expr: rasp.Loop) -> SOpValue:
    """`steps` applications of the body, each a fresh evaluation in which the state is bound to
    the previous result; values of the body's expressions that do not read the state are
    computed once and carried over."""
    state = ev.arg(expr.init)
    carried = dict(ev.memo)
    for _ in range(expr.steps):
        step = _Evaluation(ev.xs, ev.causal)
        step.memo = {key: value for key, value in carried.items() if key not in expr.state_dependent}
        step.memo[id(expr.state)] = state
        state = step.value_of(expr.next_state)
        carried = step.memo
    return list(state)


_PLAIN_NUMBERS = (int, float, bool)


def _numbers(expr: rasp.Aggregate | rasp.SumAggregate, chosen: list[Any]) -> list[Any]:
    """`chosen`, after checking every value is a number (numerical aggregation reads numbers)."""
    for value in chosen:
        if type(value) not in _PLAIN_NUMBERS and not isinstance(value, numbers.Number):
            raise RaspEvaluationError(
                f"numerical {type(expr).__name__} {expr.label!r} selected the non-numeric value "
                f"{value!r}; annotate it categorical or make its input numeric"
            )
    return chosen


def _mean(expr: rasp.Aggregate, chosen: list[Any]) -> float:
    """Numerical aggregation: the mean of the selected values."""
    return sum(_numbers(expr, chosen)) / len(chosen)


def _common_value(expr: rasp.Aggregate, chosen: list[Any]) -> Any:
    """Categorical aggregation: the one value all selected keys carry."""
    first = chosen[0]
    for value in chosen[1:]:
        if value != first:
            raise RaspEvaluationError(
                f"categorical Aggregate {expr.label!r} selected different values {first!r} and "
                f"{value!r}; a categorical aggregate needs all selected values equal (annotate "
                "it numerical to average numbers)"
            )
    return first


def _check_same_length(expr: rasp.RASPExpr, fst: int, snd: int) -> None:
    if fst != snd:
        raise RaspEvaluationError(
            f"{type(expr).__name__} {expr.label!r}: operands have different lengths "
            f"({fst} vs {snd})"
        )


_RULES: dict[type, Callable[[_Evaluation, Any], Any]] = {
    rasp.TokensType: _tokens,
    rasp.IndicesType: _indices,
    rasp.LengthType: _length,
    rasp.Full: _full,
    rasp.ConstantSOp: _constant_sop,
    rasp.Map: _map,
    rasp.SequenceMap: _sequence_map,
    rasp.Aggregate: _aggregate,
    rasp.SelectorWidth: _selector_width,
    rasp.SumAggregate: _sum_aggregate,
    rasp.Loop: _loop,
    rasp.LoopState: _loop_state,
    rasp.Select: _select,
    rasp.ConstantSelector: _constant_selector,
    rasp.SelectorAnd: _selector_binary(np.logical_and),
    rasp.SelectorOr: _selector_binary(np.logical_or),
    rasp.SelectorNot: _selector_not,
}


def _rule_for(expr: rasp.RASPExpr) -> Callable[[_Evaluation, Any], Any]:
    """The rule of the nearest known class in ``expr``'s MRO (subclasses inherit rules)."""
    for cls in type(expr).__mro__:
        rule = _RULES.get(cls)
        if rule is not None:
            return rule
    raise RaspEvaluationError(
        f"cannot evaluate {expr.label!r}: unknown expression type {type(expr).__name__}"
    )


# Calling an expression (`RASPExpr.__call__`) runs this evaluator; see `rasp.expressions.REFERENCE_EVALUATOR`.
rasp.REFERENCE_EVALUATOR = evaluate
