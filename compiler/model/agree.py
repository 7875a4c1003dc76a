"""When a compiled model's output agrees with the RASP evaluator: one rule for every check.

A decoded output agrees with the evaluator's value when both are None, when both are numbers
within ``AGREE_TOLERANCE`` relative to the evaluator's value (at least 1, so near zero it is an
absolute tolerance), or, for any other value, when they are equal (``==``). The tolerance covers
two things a float model cannot avoid: a numerical output is one float32 number, and a number read
out through a categorical copy may be a float64 rounding twin of the evaluator's (the evaluator's
``1/3 + -1`` is ``-0.6666666666666667``, its mean of ``[-1, -1, 0]`` is ``-0.6666666666666666``;
the compiled copy keeps one of them, `compiler.passes.rounding`). Differential fuzzing, the zoo,
its audit and every exactness check (`compression.evaluation`) use this rule.

A categorical output can hold both twins as values of their own (`x + 1` at a merged copy of `x`
gives one twin where the evaluator has the other, which is itself reached at other inputs); the
exactness check, which compares logit indices on the device, then counts a twin of the expected
value as right (`twin_classes`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from compiler.passes.rounding import twin_groups

AGREE_TOLERANCE = 1e-3  # |model - rasp| <= AGREE_TOLERANCE * max(1, |rasp|)

_NUMBERS = (bool, int, float, np.number)


def same_value(got: Any, expected: Any) -> bool:
    """Whether the model's decoded ``got`` agrees with the evaluator's ``expected`` (module rule)."""
    if got is None or expected is None:
        return got is None and expected is None
    if isinstance(got, _NUMBERS) and isinstance(expected, _NUMBERS):
        return abs(float(got) - float(expected)) <= AGREE_TOLERANCE * max(1.0, abs(float(expected)))
    return bool(got == expected)


def same_outputs(got: Sequence[Any] | Mapping[str, Sequence[Any]],
                 expected: Sequence[Any] | Mapping[str, Sequence[Any]]) -> bool:
    """Whether two decoded sequences have one length and agree at every position; for several
    outputs (`{label: sequence}`, as `apply_batch` decodes programs compiled together), whether
    they have the same labels and every output agrees."""
    if isinstance(got, Mapping) or isinstance(expected, Mapping):
        return (isinstance(got, Mapping) and isinstance(expected, Mapping) and got.keys() == expected.keys()
                and all(same_outputs(got[label], expected[label]) for label in got))
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


def twin_classes(values: Sequence[Any]) -> np.ndarray:
    """``[V]`` int32: for each categorical output value (logit order), the index of the first value of
    its float-rounding twin group (`compiler.passes.rounding.twin_groups`: numbers within 1e-9
    relative, which agree under the module rule); its own index for a value without twins.

    Args:
      values: a categorical output's values in logit order (``OutputEncoder.values``).

    Returns:
      The class index of every value; two logits decode to agreeing numbers when their classes match.
    """
    classes = np.arange(len(values), dtype=np.int32)
    groups = twin_groups(values)
    if groups:
        first: dict[Any, int] = {}
        for i, value in enumerate(values):
            if isinstance(value, _NUMBERS) and not isinstance(value, bool):
                first.setdefault(value, i)
        for group in groups:
            lead = min(first[v] for v in group)
            for v in group:
                classes[first[v]] = lead
    return classes
