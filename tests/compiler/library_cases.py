"""The library programs at the settings the differential tests compile them at.

Each case builds a fresh program (so labels are those of a fresh build), with the vocabulary it
needs and whether it can be compiled causally. A program that cannot be compiled causally says
why; the differential test checks that the compiler refuses it with that reason.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from rasp import lib, rasp

BRACKETS = ("(", ")", "{", "}", "a")


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[int, Sequence[Hashable]], rasp.SOp]  # (max_seq_len, vocab) -> program
    vocab: Callable[[int], tuple]  # size -> vocabulary
    causal_refusal: str | None = None  # why causal compilation is refused; None = allowed


def _ints(size: int) -> tuple:
    return tuple(range(1, size + 1))


def _letters(size: int) -> tuple:
    return tuple(f"t{i}" for i in range(size))


def _brackets(size: int) -> tuple:
    return BRACKETS


READS_LATER = "may select keys after the query"

CASES: tuple[Case, ...] = (
    Case("length", lambda n, v: lib.make_length(), _letters, READS_LATER),
    Case("reverse", lambda n, v: lib.make_reverse(rasp.tokens), _letters, READS_LATER),
    Case(
        "frac_prevs",
        lambda n, v: lib.make_frac_prevs(rasp.numerical(rasp.Map(lambda t: t == v[0], rasp.tokens))),
        _letters,
    ),
    Case("pair_balance", lambda n, v: lib.make_pair_balance(rasp.tokens, "(", ")"), _brackets),
    Case(
        "shuffle_dyck",
        lambda n, v: lib.make_shuffle_dyck([("(", ")"), ("{", "}")]),
        _brackets,
        READS_LATER,
    ),
    Case("shuffle_dyck2", lambda n, v: lib.make_shuffle_dyck2(), _brackets, READS_LATER),
    Case("hist", lambda n, v: lib.make_hist(), _letters, READS_LATER),
    Case(
        "sort_unique",
        lambda n, v: lib.make_sort_unique(rasp.tokens, rasp.tokens),
        _ints,
        READS_LATER,
    ),
    Case(
        "sort",
        lambda n, v: lib.make_sort(rasp.tokens, rasp.tokens, max_seq_len=n, min_key=min(v)),
        _ints,
        READS_LATER,
    ),
    Case("sort_freq", lambda n, v: lib.make_sort_freq(n), _ints, READS_LATER),
    Case("count", lambda n, v: lib.make_count(rasp.tokens, v[0]), _letters, READS_LATER),
    Case("count_less_freq", lambda n, v: lib.make_count_less_freq(2), _letters, READS_LATER),
    Case("shift_by", lambda n, v: lib.shift_by(2, rasp.tokens), _letters),
    Case("detect_pattern", lambda n, v: lib.detect_pattern(rasp.tokens, list(v[:3])), _letters),
    Case(
        "nary_sequencemap",
        lambda n, v: lib.make_nary_sequencemap(
            lambda a, b, c: (a + b + c) % 4, rasp.tokens, rasp.tokens, rasp.indices
        ),
        _ints,
    ),
)


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
