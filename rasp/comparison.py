"""Selector predicates: the ``Comparison`` enum and combinations of predicates.

A predicate is called as ``predicate(key, query)``; ``Comparison.LT`` means ``key < query``.
"""

import dataclasses
import enum
from collections.abc import Callable
from typing import Any

Predicate = Callable[[Any, Any], bool]

_COMPARISONS: dict[str, Predicate] = {
    "==": lambda key, query: key == query,
    "<": lambda key, query: key < query,
    "<=": lambda key, query: key <= query,
    ">": lambda key, query: key > query,
    ">=": lambda key, query: key >= query,
    "!=": lambda key, query: key != query,
    "TRUE": lambda key, query: True,
    "FALSE": lambda key, query: False,
}


class Comparison(enum.Enum):
    """The built-in comparisons a ``Select`` can use, applied as ``cmp(key, query)``."""

    EQ = "=="
    LT = "<"
    LEQ = "<="
    GT = ">"
    GEQ = ">="
    NEQ = "!="
    TRUE = "TRUE"
    FALSE = "FALSE"

    def __call__(self, key: Any, query: Any) -> bool:
        """Compare ``key`` with ``query``; ``None`` is not comparable and raises ValueError."""
        if key is None:
            raise ValueError(f"Comparison.{self.name}: key is None")
        if query is None:
            raise ValueError(f"Comparison.{self.name}: query is None")
        return bool(_COMPARISONS[self.value](key, query))


_RAW: dict[Comparison, Predicate] = {cmp: _COMPARISONS[cmp.value] for cmp in Comparison}


def without_none_check(predicate: Predicate) -> Predicate:
    """The plain function behind a ``Comparison`` (skipping its ``None`` check), else itself.

    The evaluator never passes ``None``, so it calls this faster form in its inner loop.
    """
    if isinstance(predicate, Comparison):
        return _RAW[predicate]
    return predicate


@dataclasses.dataclass(frozen=True)
class PredicateAnd:
    """``fst(key, query) and snd(key, query)``: the predicate of two fused Selects."""

    fst: Predicate
    snd: Predicate

    def __call__(self, key: Any, query: Any) -> bool:
        return bool(self.fst(key, query)) and bool(self.snd(key, query))


@dataclasses.dataclass(frozen=True)
class PredicateOr:
    """``fst(key, query) or snd(key, query)``: the predicate of two fused Selects."""

    fst: Predicate
    snd: Predicate

    def __call__(self, key: Any, query: Any) -> bool:
        return bool(self.fst(key, query)) or bool(self.snd(key, query))


@dataclasses.dataclass(frozen=True)
class PredicateNot:
    """``not inner(key, query)``: the predicate of a negated Select."""

    inner: Predicate

    def __call__(self, key: Any, query: Any) -> bool:
        return not bool(self.inner(key, query))
