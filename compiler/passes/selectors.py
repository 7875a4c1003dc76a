"""Selectors as conjunctions of leaf predicates, and what can be proven about them.

An attention head implements a selector exactly when every selected key gets the same logit and
every unselected key a lower one. Summing 0/1 predicate matrices gives that for a conjunction
(`and`) of leaves: a key is selected iff it scores the number of leaves. So every selector is
normalised here into such a conjunction: `not` is pushed into the leaf predicates, `or` (and
`not and`) is allowed when its operands read the same keys and queries (one combined predicate),
and leaves over the same keys and queries are merged. Anything else has no sound single-head
construction over the s-ops it reads; `compiler.passes.joint_selectors` rewrites such selectors
into one leaf over packed s-ops before tracing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import networkx as nx

from compiler.errors import CompilerError, UnsupportedProgramError, ValueInferenceError
from compiler.passes import nodes
from craft.bases import INDICES_NAME
from rasp import rasp
from rasp.comparison import PredicateAnd, PredicateNot, PredicateOr

Predicate = Callable[[Any, Any], bool]  # predicate(key, query)


@dataclass(frozen=True)
class Leaf:
    """One predicate over the values of a keys s-op and a queries s-op."""

    keys: str
    queries: str
    predicate: Predicate
    negated: bool  # True when a `not` was pushed into this leaf


@dataclass(frozen=True)
class ConstantPattern:
    """A `ConstantSelector`'s matrix as a predicate over (key index, query index); positions
    outside the matrix are not selected."""

    matrix: tuple[tuple[bool, ...], ...]

    def __call__(self, key: int, query: int) -> bool:
        if query < len(self.matrix) and key < len(self.matrix[query]):
            return self.matrix[query][key]
        return False


@dataclass(frozen=True)
class CheckedPredicate:
    """A user predicate that reports its own failures: any exception it raises on a
    `(key, query)` pair becomes a `ValueInferenceError` naming the selector and the pair.

    The compiler calls predicates on every value pair the keys and queries can take (value
    inference, validation, lowering); a predicate written for the values the user had in mind
    can fail on others, and a bare `TypeError` from deep in lowering named neither.
    """

    label: str
    predicate: Predicate

    def __call__(self, key: Any, query: Any) -> bool:
        try:
            return bool(self.predicate(key, query))
        except CompilerError:
            raise
        except Exception as error:
            raise ValueInferenceError(
                f"{self.label}: its predicate {self.predicate!r} raised {type(error).__name__}: "
                f"{error} on key={key!r}, query={query!r}, values the keys and queries can "
                "take; make the predicate handle every such value (or narrow the s-ops' values)"
            ) from error

    def __repr__(self) -> str:
        return repr(self.predicate)


def _checked(label: str, predicate: Predicate) -> Predicate:
    """User callables get a `CheckedPredicate`; the standard `Comparison` members stay as they
    are, because the chamber recognises them for vectorised tables."""
    return predicate if isinstance(predicate, rasp.Comparison) else CheckedPredicate(label, predicate)


def _rewrite_advice(label: str) -> str:
    return (
        f"{label}: this selector combination has no exact single-head construction (an `or`, or "
        "a `not` of an `and`, over selectors reading different s-ops); rewrite it over product "
        "s-ops: build keys2 = SequenceMap(lambda a, b: (a, b), key_a, key_b) and likewise for the "
        "queries, then use one Select(keys2, queries2, predicate) with the combined predicate"
    )


def conjunction(selector: rasp.Selector) -> tuple[Leaf, ...]:
    """Normalise `selector` into leaves whose conjunction it equals; raise when impossible."""
    leaves = _normalise(selector, negate=False)
    return _merge(leaves)


def _normalise(selector: rasp.Selector, negate: bool) -> list[Leaf]:
    if isinstance(selector, rasp.Select):
        predicate: Predicate = _checked(selector.label, selector.predicate)
        if negate:
            predicate = PredicateNot(predicate)
        return [Leaf(selector.keys.label, selector.queries.label, predicate, negate)]
    if isinstance(selector, rasp.ConstantSelector):
        predicate = ConstantPattern(tuple(tuple(bool(x) for x in row) for row in selector.value))
        if negate:
            predicate = PredicateNot(predicate)
        return [Leaf(INDICES_NAME, INDICES_NAME, predicate, negate)]
    if isinstance(selector, rasp.SelectorNot):
        return _normalise(selector.inner, not negate)
    if not isinstance(selector, (rasp.SelectorAnd, rasp.SelectorOr)):
        raise UnsupportedProgramError(
            [f"{selector.label}: selector type {type(selector).__name__} is not supported"]
        )
    is_and = isinstance(selector, rasp.SelectorAnd)
    if is_and != negate:  # and, or not-or (= and of nots)
        return _normalise(selector.fst, negate) + _normalise(selector.snd, negate)
    # or, or not-and (= or of nots): only sound as one leaf over shared keys and queries.
    left = _merge(_normalise(selector.fst, negate))
    right = _merge(_normalise(selector.snd, negate))
    pairs = {(leaf.keys, leaf.queries) for leaf in left + right}
    if len(pairs) != 1:
        raise UnsupportedProgramError([_rewrite_advice(selector.label)])
    keys, queries = pairs.pop()
    combined = PredicateOr(left[0].predicate, right[0].predicate)
    negated = left[0].negated or right[0].negated
    return [Leaf(keys, queries, combined, negated)]


def _merge(leaves: list[Leaf]) -> tuple[Leaf, ...]:
    """Merge leaves reading the same keys and queries into one (their conjunction)."""
    groups: dict[tuple[str, str], list[Leaf]] = {}
    for leaf in leaves:
        groups.setdefault((leaf.keys, leaf.queries), []).append(leaf)
    merged = []
    for (keys, queries), group in sorted(groups.items()):
        if len(group) == 1:
            merged.append(group[0])
        else:
            merged.append(
                Leaf(keys, queries, functools.reduce(PredicateAnd, (leaf.predicate for leaf in group)),
                     any(leaf.negated for leaf in group))
            )
    return tuple(merged)


def selects_none(predicate: Predicate) -> bool:
    """Whether a leaf with this predicate selects a pair whose key or query is None.

    A `Select` never selects such a pair; `not` flips that (`~select` selects it), `and` / `or`
    combine it. Any other predicate (a comparison, a user function, a folded predicate) is one
    `Select`'s: it does not.
    """
    if isinstance(predicate, PredicateNot):
        return not selects_none(predicate.inner)
    if isinstance(predicate, PredicateAnd):
        return selects_none(predicate.fst) and selects_none(predicate.snd)
    if isinstance(predicate, PredicateOr):
        return selects_none(predicate.fst) or selects_none(predicate.snd)
    return False


def _safe_call(label: str, predicate: Predicate, key: Any, query: Any) -> bool:
    try:
        return bool(predicate(key, query))
    except Exception as error:
        raise UnsupportedProgramError(
            [f"{label}: its predicate raised {type(error).__name__}: {error} on "
             f"(key={key!r}, query={query!r}); make it handle every value the s-ops can take"]
        ) from error


def always_selects(graph: nx.DiGraph, label: str, leaves: tuple[Leaf, ...]) -> bool:
    """True when every query provably selects at least one key (so `default` never shows).

    Sufficient condition: every leaf selects the query's own position — its keys and queries are
    the same non-None s-op and the predicate holds on the diagonal — or selects everything.
    """
    for leaf in leaves:
        keys_node = graph.nodes[leaf.keys]
        queries_node = graph.nodes[leaf.queries]
        if keys_node[nodes.NULLABLE] or queries_node[nodes.NULLABLE]:
            return False
        if leaf.keys == leaf.queries:
            values = keys_node[nodes.VALUE_SET]
            if all(_safe_call(label, leaf.predicate, v, v) for v in values):
                continue
        if all(
            _safe_call(label, leaf.predicate, k, q)
            for k in keys_node[nodes.VALUE_SET]
            for q in queries_node[nodes.VALUE_SET]
        ):
            continue
        return False
    return True


def reads_later_positions(graph: nx.DiGraph, label: str, leaves: tuple[Leaf, ...]) -> bool:
    """False when no query can select a key at a later position (causal masking is a no-op).

    Provable only for a leaf comparing `indices` with `indices`: checked on every pair of
    positions key > query. A conjunction is safe when any of its leaves is.
    """
    for leaf in leaves:
        if leaf.keys == INDICES_NAME and leaf.queries == INDICES_NAME:
            positions = sorted(graph.nodes[INDICES_NAME][nodes.VALUE_SET])
            if not any(
                _safe_call(label, leaf.predicate, k, q)
                for q in positions
                for k in positions
                if k > q
            ):
                return False
    return True
