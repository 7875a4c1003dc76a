"""A fixed menu of named, printable functions for randomly generated RASP programs.

Random programs must print as runnable Python, so every function they use is one of the source
strings below (evaluated once with `eval`). Each entry records the value types it accepts and
produces: `"num"` (ints, bools and floats, which Python mixes freely) or `"str"` (non-empty
strings: the string tokens, and what `str(x)` or `type(x).__name__` make of a number).

Some entries are type-sensitive on purpose (`str(x)`, `isinstance(x, int)`,
`len(str(k)) == len(str(q))`): 1, 1.0 and True are equal, but these functions tell them apart,
as the evaluator does, so they check that the compiler hands every function the values, types
included, that the evaluator does. `MANY_TO_ONE` lists the Maps that send several values to one
(the start of the generator's lookup chains).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class MenuFunction:
    """One menu entry: its source text, argument value types and result value type."""

    source: str
    arg_types: tuple[str, ...]
    result_type: str
    may_return_none: bool = False

    @property
    def arity(self) -> int:
        return len(self.arg_types)


def _entries(arg_types: tuple[str, ...], result_type: str, *sources: str) -> list[MenuFunction]:
    return [MenuFunction(source, arg_types, result_type) for source in sources]


UNARY: tuple[MenuFunction, ...] = (
    *_entries(
        ("num",), "num",
        "lambda x: x + 1",
        "lambda x: x - 2",
        "lambda x: -x",
        "lambda x: 2 * x",
        "lambda x: x % 3",
        "lambda x: x // 2",
        "lambda x: abs(x - 2)",
        "lambda x: min(x, 2)",
        "lambda x: 1 - x",
        "lambda x: x > 1",
        "lambda x: x == 0",
        "lambda x: x % 2 == 0",
        "lambda x: x < 0",
        "lambda x: not x",
        "lambda x: 1 if x else -1",
        "lambda x: round(x)",
        "lambda x: x / 2",
        "lambda x: len(str(x))",
        "lambda x: isinstance(x, int)",
        "lambda x: 1 if isinstance(x, float) else x",
    ),
    MenuFunction("lambda x: None if x == 0 else x", ("num",), "num", may_return_none=True),
    *_entries(("num",), "str", "lambda x: str(x)", "lambda x: type(x).__name__"),
    *_entries(
        ("str",), "num",
        "lambda x: ord(x[0]) % 3",
        "lambda x: x < 'c'",
        "lambda x: x == 'a'",
        "lambda x: len(x)",
    ),
    *_entries(
        ("str",), "str",
        "lambda x: x.upper()",
        "lambda x: 'z' if x == 'a' else x",
        "lambda x: x[0]",
    ),
    MenuFunction("lambda x: None if x == 'b' else x", ("str",), "str", may_return_none=True),
)

BINARY: tuple[MenuFunction, ...] = (
    *_entries(
        ("num", "num"), "num",
        "lambda x, y: x + y",
        "lambda x, y: x - y",
        "lambda x, y: max(x, y)",
        "lambda x, y: x * y",
        "lambda x, y: x < y",
        "lambda x, y: x == y",
        "lambda x, y: x and y",
        "lambda x, y: x or y",
        "lambda x, y: (x + y) % 3",
    ),
    MenuFunction("lambda x, y: str(x) + str(y)", ("num", "num"), "str"),
    MenuFunction("lambda x, y: type(x) == type(y)", ("num", "num"), "num"),
    *_entries(("str", "str"), "str", "lambda x, y: min(x, y)", "lambda x, y: x if x == y else 'z'"),
    *_entries(("str", "str"), "num", "lambda x, y: x == y", "lambda x, y: x < y"),
    *_entries(("str", "num"), "str", "lambda x, y: x if y else 'z'"),
    *_entries(("num", "str"), "num", "lambda x, y: x + (y == 'a')"),
)

# Custom Select predicates, called as predicate(key, query).
PREDICATES: tuple[MenuFunction, ...] = (
    *_entries(
        ("num", "num"), "num",
        "lambda k, q: k == q - 1",
        "lambda k, q: abs(k - q) <= 1",
        "lambda k, q: (k + q) % 2 == 0",
        "lambda k, q: k > q or k == 0",
        "lambda k, q: len(str(k)) == len(str(q))",
        "lambda k, q: isinstance(k, int) and k <= q",
    ),
    *_entries(("str", "str"), "num", "lambda k, q: k != q and k < 'c'"),
    *_entries(("str", "num"), "num", "lambda k, q: k == 'a' or q == 0"),
    *_entries(("num", "str"), "num", "lambda k, q: k == 0 or q == 'a'"),
)

# Maps sending several values to one, for lookup chains (`random_programs`): their results feed
# copies (Aggregates) and further Maps / SequenceMaps.
MANY_TO_ONE: tuple[MenuFunction, ...] = (
    *_entries(
        ("num",), "num",
        "lambda x: x % 2",
        "lambda x: x // 3",
        "lambda x: min(x, 1)",
        "lambda x: x > 0",
        "lambda x: x / 2 if x > 2 else x",
    ),
    *_entries(("str",), "num", "lambda x: ord(x[0]) % 2", "lambda x: x < 'b'"),
    *_entries(("str",), "str", "lambda x: 'a' if x < 'c' else x"),
)

# Three-argument functions for lib.make_nary_sequencemap.
TERNARY: tuple[MenuFunction, ...] = (
    *_entries(("num", "num", "num"), "num", "lambda a, b, c: (a + b + c) % 3", "lambda a, b, c: a * b - c"),
    *_entries(("str", "num", "num"), "num", "lambda a, b, c: (a == 'a') + b - c"),
)

# Comparisons valid between any two value types, and those needing comparable types.
ANY_TYPE_COMPARISONS = ("EQ", "NEQ", "TRUE", "FALSE")
ORDER_COMPARISONS = ("LT", "LEQ", "GT", "GEQ")


def matching(menu: tuple[MenuFunction, ...], arg_types: tuple[str, ...]) -> list[MenuFunction]:
    """Entries of `menu` whose argument types are exactly `arg_types`."""
    return [entry for entry in menu if entry.arg_types == arg_types]

