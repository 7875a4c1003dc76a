"""Library programs the CLI can compile by name, with a vocabulary, length and input for each.

`EXAMPLES[name].build(max_seq_len)` returns the s-op (a few programs depend on the length).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable

from rasp import lib, rasp


@dataclasses.dataclass(frozen=True)
class Example:
    """A library program with sensible defaults for compiling and running it."""

    name: str
    build: Callable[[int], rasp.SOp]
    vocab: tuple[Hashable, ...]
    max_seq_len: int
    example_input: tuple[Hashable, ...]  # without BOS
    description: str


def _fixed(make: Callable[[], rasp.SOp]) -> Callable[[int], rasp.SOp]:
    """A builder that ignores `max_seq_len`."""
    return lambda max_seq_len: make()


_LETTERS = ("a", "b", "c")

_ALL = (
    Example(
        "frac_prevs",
        _fixed(lambda: lib.make_frac_prevs(rasp.tokens == "x")),
        ("a", "b", "c", "x"),
        5,
        ("x", "a", "c", "x"),
        "fraction of positions so far holding 'x' (numerical)",
    ),
    Example("length", _fixed(lib.make_length), _LETTERS, 5, ("a", "b", "c"), "input length"),
    Example(
        "reverse",
        _fixed(lambda: lib.make_reverse(rasp.tokens)),
        ("a", "b", "c", "d"),
        5,
        ("a", "b", "c", "d"),
        "the tokens in reverse order",
    ),
    Example("hist", _fixed(lib.make_hist), _LETTERS, 5, ("a", "b", "a", "c"), "occurrences of each token"),
    Example(
        "sort_unique",
        _fixed(lambda: lib.make_sort_unique(rasp.tokens, rasp.tokens)),
        (1, 2, 3, 4, 5),
        5,
        (3, 1, 4, 2),
        "distinct integer tokens in ascending order",
    ),
    Example(
        "sort",
        lambda n: lib.make_sort(rasp.tokens, rasp.tokens, max_seq_len=n, min_key=1),
        (0, 1, 2, 3),
        5,
        (2, 1, 2, 0),
        "integer tokens in ascending order, duplicates allowed",
    ),
    Example(
        "sort_freq",
        lib.make_sort_freq,
        _LETTERS,
        5,
        ("a", "b", "b", "c", "b"),
        "tokens by descending frequency",
    ),
    Example(
        "count_a",
        _fixed(lambda: lib.make_count(rasp.tokens, "a")),
        _LETTERS,
        5,
        ("a", "b", "a"),
        "how many tokens are 'a'",
    ),
    Example(
        "count_less_freq",
        _fixed(lambda: lib.make_count_less_freq(1)),
        _LETTERS,
        5,
        ("a", "b", "a", "c"),
        "how many tokens occur at most once",
    ),
    Example(
        "shift_by_1",
        _fixed(lambda: lib.shift_by(1, rasp.tokens)),
        _LETTERS,
        5,
        ("a", "b", "c"),
        "the tokens moved one position right",
    ),
    Example(
        "detect_abc",
        _fixed(lambda: lib.detect_pattern(rasp.tokens, "abc")),
        _LETTERS,
        6,
        ("a", "b", "c", "a", "b"),
        "where the pattern a b c ends",
    ),
    Example(
        "dyck1",
        _fixed(lambda: lib.make_shuffle_dyck(["()"]).named("dyck1")),
        ("(", ")"),
        6,
        ("(", "(", ")", ")"),
        "balanced parentheses",
    ),
    Example(
        "shuffle_dyck2",
        _fixed(lib.make_shuffle_dyck2),
        ("(", ")", "{", "}"),
        6,
        ("(", "{", ")", "}"),
        "shuffle of balanced () and {}",
    ),
)

EXAMPLES: dict[str, Example] = {example.name: example for example in _ALL}
