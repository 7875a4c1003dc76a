"""Helpers shared by the compiler tests: random inputs and output comparison."""

from __future__ import annotations

import random
from collections.abc import Hashable, Sequence
from typing import Any


def random_inputs(vocab: Sequence[Hashable], max_seq_len: int, count: int, seed: int) -> list[list]:
    """`count` random token lists of random lengths 1..max_seq_len."""
    rng = random.Random(seed)
    return [
        [rng.choice(vocab) for _ in range(rng.randint(1, max_seq_len))] for _ in range(count)
    ]


def outputs_match(got: Sequence[Any], expected: Sequence[Any], tolerance: float = 1e-3) -> bool:
    """Decoded model output equals RASP's: exact for categorical, within `tolerance` for numbers."""
    if len(got) != len(expected):
        return False
    for g, e in zip(got, expected):
        if g is None or e is None:
            if g is not e:
                return False
        elif isinstance(g, float) and not isinstance(e, str):
            if abs(g - float(e)) > tolerance:
                return False
        elif g != e:
            return False
    return True
