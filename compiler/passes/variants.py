"""Equal values of different Python types ("variants"), and the checks that keep them harmless.

`1`, `1.0` and `True` compare and hash equal, so a Python set, and a categorical s-op's one-hot
subspace, holds one of them: the compiled model cannot tell which one an s-op carries. The
evaluator can: `str(1)` is `'1'`, `str(1.0)` is `'1.0'`. Value inference therefore gives every
s-op node, besides its value set (one representative per equality class), the record
`nodes.VARIANTS`: `{value: (variant, variant, ...)}` for the values the s-op can take with more
than one type (tuples count element by element: `(1, 'a')` and `(1.0, 'a')` are two variants).
Most s-ops take every value with one type, so the record is usually empty and costs nothing.

Every function or predicate reading an s-op with a record is called on each variant of the
values it sees (`results`, `check_select`); when the results differ the program is refused
(`ValueInferenceError`), because the model, which computes from the representative, would be
wrong for the other variant. Equal results of different types (`x + 0` on `1` and `1.0`) are
fine: they become variants of the reader's own values.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from compiler.errors import ValueInferenceError

# {value: its distinct typed variants (two or more)}; looked up by equality.
Variants = Mapping[Any, tuple[Any, ...]]

NO_VARIANTS: Variants = {}

_CONTAINERS = (tuple, frozenset)
_MIXED = object()


def variant_key(value: Any) -> Any:
    """A key that tells variants apart: the value with its type, element by element."""
    kind = type(value)
    if kind is tuple:
        return (tuple, tuple(variant_key(v) for v in value))
    if kind is frozenset:
        return (frozenset, frozenset(variant_key(v) for v in value))
    return (kind, value)


def same_variant(a: Any, b: Any) -> bool:
    """Whether two equal values are also of one type (elements of tuples included)."""
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is tuple:
        return all(same_variant(x, y) for x, y in zip(a, b))
    if kind is frozenset:
        return variant_key(a) == variant_key(b)
    return True


class Collector:
    """The values an s-op takes, gathered one result at a time, with their variants.

    `values` keeps the first object seen of every equality class (the representative);
    `variants` lists, for the classes that were seen with more than one type, every variant.
    While every value added has one non-container type no variant can arise and adding is a
    plain set insertion.
    """

    def __init__(self) -> None:
        self.values: set = set()
        self._type: Any = None  # the one type of every value so far, or _MIXED
        self._stored: dict[Any, Any] | None = None  # value -> its representative, once mixed
        self._variants: dict[Any, list[Any]] = {}

    def add(self, value: Any) -> None:
        """Record one value as the evaluator produces it."""
        kind = type(value)
        if kind is self._type:
            self.values.add(value)
            return
        if self._type is None and kind not in _CONTAINERS:
            self._type = kind
            self.values.add(value)
            return
        self._add_mixed(value)

    def add_all(self, values: Iterable[Any], kind: type | None = None) -> None:
        """Record many values; `kind`, when given, is the one type they all have."""
        if kind is not None and kind not in _CONTAINERS and self._type in (None, kind):
            self._type = kind
            self.values.update(values)
            return
        for value in values:
            self.add(value)

    def add_variants(self, values: Iterable[Any], variants: Variants) -> None:
        """Record an s-op's values with every variant of them (e.g. what an Aggregate copies)."""
        for value in values:
            if variants and value in variants:
                for variant in variants[value]:
                    self.add(variant)
            else:
                self.add(value)

    def _add_mixed(self, value: Any) -> None:
        if self._stored is None:
            self._type = _MIXED
            self._stored = {v: v for v in self.values}
        stored = self._stored.setdefault(value, value)
        if stored is value:
            self.values.add(value)
            return
        if same_variant(stored, value):
            return
        known = self._variants.setdefault(value, [stored])
        if not any(same_variant(v, value) for v in known):
            known.append(value)

    @property
    def variants(self) -> dict[Any, tuple[Any, ...]]:
        """`{representative: variants}` for the classes seen with more than one type."""
        return {variants[0]: tuple(variants) for variants in self._variants.values()}


def choices(variants: Variants, value: Any) -> tuple[Any, ...]:
    """The variants of `value` (just `value` when it has one type)."""
    if variants and value in variants:
        return variants[value]
    return (value,)


def merged(
    values: Iterable[Any], variants: Variants, more: Iterable[Any], more_variants: Variants
) -> tuple[frozenset, dict[Any, tuple[Any, ...]]]:
    """The union of two value sets with their variants (a loop state's rounds)."""
    collector = Collector()
    collector.add_variants(values, variants)
    collector.add_variants(more, more_variants)
    return frozenset(collector.values), collector.variants


def signature(variants: Variants) -> frozenset:
    """A comparable form of a variants record (which classes, with which typed variants)."""
    return frozenset(frozenset(variant_key(v) for v in vs) for vs in variants.values())


def _types(variants: tuple[Any, ...]) -> str:
    return " and ".join(f"{v!r} ({type(v).__name__})" for v in variants)


def results(
    reader: str,
    sources: tuple[str, ...],
    args: tuple[Any, ...],
    options: tuple[tuple[Any, ...] | None, ...],
    call: Callable[[tuple[Any, ...]], Any],
    diagonal: bool = False,
) -> list[Any]:
    """A function's results on every combination of the variants of `args` (all equal, or
    refused), in the order `itertools.product` gives.

    Args:
      reader: the label of the s-op whose function it is (named in the error).
      sources: the labels of the s-ops the arguments come from.
      args: one value per argument (representatives).
      options: per argument, its variants, or None where it has one type.
      call: evaluates the function on a tuple of arguments (with the caller's error handling).
      diagonal: both arguments are one s-op at one position, so they are one variant.

    Raises:
      ValueInferenceError: two variants give different results, so the model, which holds one
        value per equality class, would compute the wrong one for the other.
    """
    if diagonal:
        combinations: Iterable[tuple[Any, ...]] = [(v,) * len(args) for v in options[0] or args[:1]]
    else:
        combinations = itertools.product(*(o if o is not None else (a,) for a, o in zip(args, options)))
    found = [call(combination) for combination in combinations]
    first = found[0]
    for result in found[1:]:
        if not result == first:
            raise _refusal(reader, sources, "function", args, options, first, result)
    return found


def check_select(
    label: str,
    predicate: Callable[[Any, Any], Any],
    keys: tuple[str, Iterable[Any], Variants],
    queries: tuple[str, Iterable[Any], Variants],
) -> None:
    """Refuse a Select whose predicate tells variants of its keys or queries apart.

    `keys` / `queries` are `(label, values, variants)`. Only pairs with a variant are called; a
    predicate that raises decides nothing here (validation reports it).
    """
    key_label, key_values, key_variants = keys
    query_label, query_values, query_variants = queries
    if not key_variants and not query_variants:
        return
    key_values, query_values = list(key_values), list(query_values)
    pairs = [(k, q) for k in key_variants for q in query_values]
    pairs += [(k, q) for q in query_variants for k in key_values if k not in key_variants]
    for key, query in pairs:
        options = (choices(key_variants, key), choices(query_variants, query))
        try:
            found = [bool(predicate(k, q)) for k, q in itertools.product(*options)]
        except Exception:
            continue
        if any(r != found[0] for r in found[1:]):
            shown = tuple(o if len(o) > 1 else None for o in options)
            other = next(r for r in found if r != found[0])
            raise _refusal(label, (key_label, query_label), "predicate", (key, query), shown, found[0], other)


def _refusal(
    reader: str,
    sources: tuple[str, ...],
    what: str,
    args: tuple[Any, ...],
    options: tuple[tuple[Any, ...] | None, ...],
    first: Any,
    other: Any,
) -> ValueInferenceError:
    ambiguous = [
        f"{source} = {arg!r}, which it can hold as {_types(option)}"
        for source, arg, option in zip(sources, args, options)
        if option is not None and len(option) > 1
    ]
    return ValueInferenceError(
        f"{reader}: its {what} reads {'; '.join(ambiguous)}, and gives different results "
        f"for these equal values of different types ({first!r} and {other!r}); the compiled "
        f"model holds one value per equality class and cannot tell them apart: make "
        f"{' / '.join(dict.fromkeys(s for s, o in zip(sources, options) if o))} take one type "
        f"(e.g. return float(...) or int(...) in the function computing it, or give an "
        f"Aggregate a default of the type of its values), or make the {what} treat equal "
        "numbers alike"
    )
