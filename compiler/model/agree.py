"""When a compiled model's output agrees with the RASP evaluator: one rule for every check.

A decoded output agrees with the evaluator's value when both are None, when both are numbers
within ``AGREE_TOLERANCE`` relative to the evaluator's value (at least 1, so near zero it is an
absolute tolerance), or, for any other value, when they are equal (``==``). The tolerance covers
two things a float model cannot avoid: a numerical output is one float32 number, and a number read
out through a categorical copy may be a float64 rounding twin of the evaluator's (the evaluator's
``1/3 + -1`` is ``-0.6666666666666667``, its mean of ``[-1, -1, 0]`` is ``-0.6666666666666666``;
the compiled copy keeps one of them, `compiler.passes.rounding`). Differential fuzzing, the zoo,
its audit and every exactness check (`compression.evaluation`) use this rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

AGREE_TOLERANCE = 1e-3  # |model - rasp| <= AGREE_TOLERANCE * max(1, |rasp|)

_NUMBERS = (bool, int, float, np.number)


def same_value(got: Any, expected: Any) -> bool:
    """Whether the model's decoded ``got`` agrees with the evaluator's ``expected`` (module rule)."""
    if got is None or expected is None:
        return got is None and expected is None
    if isinstance(got, _NUMBERS) and isinstance(expected, _NUMBERS):
        return abs(float(got) - float(expected)) <= AGREE_TOLERANCE * max(1.0, abs(float(expected)))
    return bool(got == expected)


def same_outputs(got: Sequence[Any], expected: Sequence[Any]) -> bool:
    """Whether two decoded sequences have one length and agree at every position."""
    return len(got) == len(expected) and all(same_value(a, b) for a, b in zip(got, expected))


def agreeing_index(values: Sequence[Any], expected: Any) -> int:
    """The index of the categorical output value that agrees with the evaluator's ``expected``:
    the equal one (same value, ``==``), else, for a number, the nearest value that agrees under the
    module rule; -1 when none does (no decoded output can be right).

    Args:
      values: a categorical output's values in logit order (``OutputEncoder.values``).
      expected: one value the evaluator returned (not None: None is scored by the empty threshold).

    Returns:
      An index into ``values``, or -1.
    """
    equal = next((i for i, value in enumerate(values) if value == expected), -1)
    if equal >= 0 or not isinstance(expected, _NUMBERS):
        return equal
    near = [(abs(float(v) - float(expected)), i) for i, v in enumerate(values)
            if isinstance(v, _NUMBERS) and same_value(v, expected)]
    return min(near)[1] if near else -1
