"""Small callables that operator overloads and ``Map`` fusion build.

They are frozen dataclasses rather than lambdas so they compare by value and print readably
in error messages (``RightOperand(op=<built-in function add>, value=1)``).
"""

import dataclasses
from collections.abc import Callable
from typing import Any


def logical_and(x: Any, y: Any) -> Any:
    """Python's ``x and y`` as a function (``&`` on s-ops)."""
    return x and y


def logical_or(x: Any, y: Any) -> Any:
    """Python's ``x or y`` as a function (``|`` on s-ops)."""
    return x or y


def logical_not(x: Any) -> bool:
    """Python's ``not x`` as a function (``~`` on s-ops)."""
    return not x


@dataclasses.dataclass(frozen=True)
class RightOperand:
    """``op(x, value)``: an s-op on the left of a binary operator with a constant."""

    op: Callable[[Any, Any], Any]
    value: Any

    def __call__(self, x: Any) -> Any:
        return self.op(x, self.value)


@dataclasses.dataclass(frozen=True)
class LeftOperand:
    """``op(value, x)``: a constant on the left of a binary operator with an s-op."""

    op: Callable[[Any, Any], Any]
    value: Any

    def __call__(self, x: Any) -> Any:
        return self.op(self.value, x)


@dataclasses.dataclass(frozen=True)
class Composed:
    """``outer(inner(x))``, keeping ``None`` propagation of the two unfused Maps.

    An unfused ``Map(outer, Map(inner, s))`` never calls ``outer`` on ``None``; the fused
    function must not either, so a ``None`` from ``inner`` is returned unchanged.
    """

    outer: Callable[[Any], Any]
    inner: Callable[..., Any]  # one argument, or two for a Map fused onto a SequenceMap

    def __call__(self, *args: Any) -> Any:
        y = self.inner(*args)
        return None if y is None else self.outer(y)


@dataclasses.dataclass(frozen=True)
class LinearCombination:
    """``fst_fac * x + snd_fac * y``: the function of a ``LinearSequenceMap``."""

    fst_fac: float
    snd_fac: float

    def __call__(self, x: Any, y: Any) -> Any:
        return self.fst_fac * x + self.snd_fac * y

