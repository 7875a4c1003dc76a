"""Seeded random RASP programs for differential testing of the compiler.

`generate(seed, size, vocab, max_seq_len)` returns a well-typed `ProgramSpec` (print it with
`program_spec.to_source`, build it with `program_spec.build`) of about `size` operations covering:
categorical and numerical Maps (negative outputs included, and Maps returning None), SequenceMaps
and LinearSequenceMaps, Full, Selects with every `Comparison` and custom predicates, and/or/not
selector combinations, categorical and numerical Aggregates (selectors that may select nothing
included), SelectorWidth, `lib.shift_by` and other library programs as sub-programs. With
probability `causal_guard` a selector is restricted by `& Select(indices, indices, LEQ)` (the
documented way to make a selector causal-safe), so causal compilation is exercised too.

Two statement kinds aim at value inference, where the compiler must hand every function the
values (and Python types) the evaluator does: `chain`, a lookup chain (a many-to-one Map, a copy
of it through a categorical or numerical Aggregate, then a Map or SequenceMap of the copy, once
or twice over; a numerical copy turns ints into floats and may add an int default), and
`selfseq`, a SequenceMap of an s-op with itself or with a Map of itself (only the diagonal
occurs). The menu's type-sensitive functions (`str(x)`, `isinstance(x, int)`, ...) read them.

"Well-typed" means every function receives values of the kind it expects ("num" or "str"); it does
not mean the program compiles: some random programs are (rightly) refused by the compiler, and
categorical Aggregates may raise in the evaluator on some inputs, which the fuzzer skips.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence
from typing import Any

from compiler.fuzzing import function_menu as menu
from compiler.fuzzing.program_spec import BASE_OPS, Op, ProgramSpec, prune

# Relative weights of the s-op producing statements.
KIND_WEIGHTS: dict[str, float] = {
    "map": 0.22,
    "seqmap": 0.13,
    "linmap": 0.07,
    "full": 0.02,
    "aggregate": 0.22,
    "width": 0.09,
    "shift": 0.05,
    "lib": 0.10,
    "chain": 0.07,
    "selfseq": 0.05,
}

LIB_PROGRAMS = (
    "length", "hist", "reverse", "frac_prevs", "sort_unique", "sort", "count",
    "detect_pattern", "pair_balance", "nary", "count_less_freq", "sort_freq",
)


@dataclasses.dataclass
class _Info:
    """What the generator knows about an op: its value type, encoding and whether it is used."""

    vtype: str  # "num" or "str" ("sel" for selectors)
    numerical: bool = False
    used: bool = False


class _Builder:
    """Mutable state of one generation: the ops so far and their types."""

    def __init__(self, rng: random.Random, vocab: Sequence[Any], max_seq_len: int, causal_guard: float,
                 numerical: float | None = None):
        self.rng = rng
        self.numerical = numerical
        self.vocab = list(vocab)
        self.max_seq_len = max_seq_len
        self.causal_guard = causal_guard
        token_type = "str" if all(isinstance(t, str) for t in self.vocab) else "num"
        self.ops: list[Op] = list(BASE_OPS)
        self.info: list[_Info] = [_Info(token_type), _Info("num")]

    # -- bookkeeping -----------------------------------------------------------------------

    def add(self, op: Op, vtype: str) -> int:
        for arg in op.args:
            self.info[arg].used = True
        self.ops.append(op)
        self.info.append(_Info(vtype, op.numerical))
        return len(self.ops) - 1

    def sops(self, where: Callable[[_Info], bool] = lambda info: True) -> list[int]:
        return [i for i, info in enumerate(self.info) if info.vtype != "sel" and where(info)]

    def pick(self, candidates: list[int]) -> int:
        """Prefer s-ops nobody reads yet (keeps the program connected), then recent ones."""
        fresh = [i for i in candidates if not self.info[i].used and i >= 2]
        if fresh and self.rng.random() < 0.75:
            return self.rng.choice(fresh)
        if self.rng.random() < 0.5:
            return self.rng.choice(candidates[-3:])
        return self.rng.choice(candidates)

    def pick_sop(self, vtype: str | None = None, categorical: bool = False) -> int:
        def ok(info: _Info) -> bool:
            return (vtype is None or info.vtype == vtype) and not (categorical and info.numerical)

        candidates = self.sops(ok)
        if not candidates:  # indices always qualify for "num"; tokens for their own type
            candidates = self.sops(lambda info: vtype is None or info.vtype == vtype)
        return self.pick(candidates)

    def constant_for(self, index: int) -> Any:
        """A value the s-op `index` plausibly takes (for count/detect_pattern/pair_balance)."""
        if self.info[index].vtype == "str":
            return self.rng.choice([t for t in self.vocab if isinstance(t, str)] or ["a"])
        if index == 0:
            return self.rng.choice(self.vocab)
        return self.rng.choice([0, 1, 2])

    def chance(self, default: float) -> float:
        """The probability that a new s-op is numerical: `default` (per statement kind) unless
        the caller fixed one share for every kind."""
        return default if self.numerical is None else self.numerical

    # -- statements ------------------------------------------------------------------------

    def add_map(self) -> int:
        x = self.pick_sop()
        choices = menu.matching(menu.UNARY, (self.info[x].vtype,))
        numerical = self.rng.random() < self.chance(0.3)
        if numerical:
            choices = [f for f in choices if f.result_type == "num"] or choices
        fn = self.rng.choice(choices)
        numerical = numerical and fn.result_type == "num"
        simplify = self.rng.random() < 0.8
        return self.add(Op("map", (x,), (fn.source, simplify), numerical), fn.result_type)

    def add_seqmap(self) -> int:
        x, y = self.pick_sop(), self.pick_sop()
        choices = menu.matching(menu.BINARY, (self.info[x].vtype, self.info[y].vtype))
        if not choices:
            y = self.pick_sop(self.info[x].vtype)
            choices = menu.matching(menu.BINARY, (self.info[x].vtype, self.info[y].vtype))
        fn = self.rng.choice(choices)
        numerical = fn.result_type == "num" and self.rng.random() < self.chance(0.15)
        return self.add(Op("seqmap", (x, y), (fn.source,), numerical), fn.result_type)

    def add_linmap(self) -> int:
        numeric = self.sops(lambda info: info.vtype == "num")
        preferred = [i for i in numeric if self.info[i].numerical]
        pool = preferred if preferred and self.rng.random() < 0.7 else numeric
        x, y = self.pick(pool), self.pick(pool)
        factors = (1, -1, 2, 0.5, -3)
        fst, snd = self.rng.choice(factors), self.rng.choice(factors)
        numerical = self.info[x].numerical or self.info[y].numerical or self.rng.random() < self.chance(0.5)
        return self.add(Op("linmap", (x, y), (fst, snd), numerical), "num")

    def add_full(self) -> int:
        fill = self.rng.choice([0, 1, -1, 2]) if self.rng.random() < 0.7 else self.rng.choice(self.vocab)
        vtype = "str" if isinstance(fill, str) else "num"
        return self.add(Op("full", (), (fill,), vtype == "num" and self.rng.random() < self.chance(0.3)), vtype)

    def add_select(self, keys: int, queries: int) -> int:
        kt, qt = self.info[keys].vtype, self.info[queries].vtype
        comparisons = list(menu.ANY_TYPE_COMPARISONS)
        if kt == qt:
            comparisons += menu.ORDER_COMPARISONS
        custom = menu.matching(menu.PREDICATES, (kt, qt))
        if custom and self.rng.random() < 0.3:
            predicate = self.rng.choice(custom).source
        else:
            predicate = "Comparison." + self.rng.choice(comparisons)
        return self.add(Op("select", (keys, queries), (predicate,)), "sel")

    def add_selector(self, single_key: bool) -> tuple[int, int | None]:
        """A selector statement (plus its parts); returns it and a keys s-op safe to aggregate.

        `single_key` prefers shapes whose selected keys share a value (so a categorical
        Aggregate of the returned keys s-op evaluates without error).
        """
        rng = self.rng
        existing = [i for i, info in enumerate(self.info) if info.vtype == "sel"]
        if existing and rng.random() < 0.1:
            return rng.choice(existing), None
        shape = rng.random()
        safe_sop: int | None = None
        if single_key and shape < 0.4:  # one key per query: indices == f(query s-op)
            select = self.add(Op("select", (1, self.pick_sop("num", categorical=True)),
                                 ("Comparison.EQ",)), "sel")
        elif single_key and shape < 0.8:  # keys equal to the query: they share the value
            keys = self.pick_sop(categorical=True)
            queries = self.pick_sop(self.info[keys].vtype, categorical=True)
            select = self.add(Op("select", (keys, queries), ("Comparison.EQ",)), "sel")
            safe_sop = keys
        else:
            keys = self.pick_sop(categorical=rng.random() < 0.97)
            queries = self.pick_sop(categorical=rng.random() < 0.97)
            select = self.add_select(keys, queries)
        roll = rng.random()
        style = rng.choice(["op", "cls"])
        if roll < 0.2:
            other = self.add_select(self.pick_sop(categorical=True), self.pick_sop(categorical=True))
            select = self.add(Op("and", (select, other), (style,)), "sel")
        elif roll < 0.32:
            keys, queries = self.ops[select].args if self.ops[select].kind == "select" else (0, 0)
            if rng.random() < 0.3:
                keys, queries = self.pick_sop(categorical=True), self.pick_sop(categorical=True)
            other = self.add_select(keys, queries)
            select = self.add(Op("or", (select, other), (style,)), "sel")
            safe_sop = None
        elif roll < 0.42:
            select = self.add(Op("not", (select,), (style,)), "sel")
            safe_sop = None
        if rng.random() < self.causal_guard:
            comparison = rng.choice(["Comparison.LEQ", "Comparison.LEQ", "Comparison.LT"])
            guard = self.add(Op("select", (1, 1), (comparison,)), "sel")
            select = self.add(Op("and", (select, guard), (rng.choice(["op", "cls"]),)), "sel")
        return select, safe_sop

    def add_aggregate(self) -> int:
        numerical = self.rng.random() < self.chance(0.4)
        selector, safe_sop = self.add_selector(single_key=not numerical)
        if numerical:
            values = self.pick_sop("num")
            default = 0 if self.rng.random() < 0.92 else None
            return self.add(Op("aggregate", (selector, values), (default,), True), "num")
        values = safe_sop if safe_sop is not None and self.rng.random() < 0.7 else self.pick_sop()
        default = None if self.rng.random() < 0.92 else self.constant_for(values)
        return self.add(Op("aggregate", (selector, values), (default,), False), self.info[values].vtype)

    def add_width(self) -> int:
        selector, _ = self.add_selector(single_key=False)
        return self.add(Op("width", (selector,), (), self.rng.random() < self.chance(0.25)), "num")

    def add_shift(self) -> int:
        x = self.pick_sop(categorical=self.rng.random() < 0.9)
        offset = self.rng.choice([1, 1, 2])
        return self.add(Op("shift", (x,), (offset,), self.info[x].numerical), self.info[x].vtype)

    def add_copy(self, x: int) -> int:
        """A copy of `x` through an Aggregate: from `shift` positions back (`lib.shift_by`,
        None at the start) or from the query's own position (`Select(indices, indices, EQ)`),
        categorical or, for numbers, numerical (a mean of one value: a float, `0` by default)."""
        rng = self.rng
        numerical = self.info[x].vtype == "num" and rng.random() < self.chance(0.4)
        if rng.random() < 0.4:
            return self.add(Op("shift", (x,), (rng.choice([1, 2]),), numerical), self.info[x].vtype)
        select = self.add(Op("select", (1, 1), ("Comparison.EQ",)), "sel")
        default = 0 if numerical else None
        return self.add(Op("aggregate", (select, x), (default,), numerical), self.info[x].vtype)

    def add_reader(self, x: int, others: list[int]) -> int:
        """A Map of `x`, or a SequenceMap of `x` and one of `others` (menu functions)."""
        rng = self.rng
        if others and rng.random() < 0.5:
            other = rng.choice(others)
            choices = menu.matching(menu.BINARY, (self.info[x].vtype, self.info[other].vtype))
            if choices:
                fn = rng.choice(choices)
                numerical = fn.result_type == "num" and rng.random() < self.chance(0.15)
                return self.add(Op("seqmap", (x, other), (fn.source,), numerical), fn.result_type)
        fn = rng.choice(menu.matching(menu.UNARY + menu.MANY_TO_ONE, (self.info[x].vtype,)))
        numerical = fn.result_type == "num" and rng.random() < self.chance(0.2)
        return self.add(Op("map", (x,), (fn.source, rng.random() < 0.5), numerical), fn.result_type)

    def add_chain(self) -> int:
        """A lookup chain: a many-to-one Map, a copy of it, a reader of the copy (twice over at
        times), e.g. `Map(str, Aggregate(select, Map(lambda x: x % 2, x)))`."""
        rng = self.rng
        x = self.pick_sop(categorical=rng.random() < 0.8)
        for _ in range(rng.choice([1, 1, 2])):
            fn = rng.choice(menu.matching(menu.MANY_TO_ONE, (self.info[x].vtype,)))
            numerical = fn.result_type == "num" and rng.random() < self.chance(0.2)
            mapped = self.add(Op("map", (x,), (fn.source, rng.random() < 0.5), numerical), fn.result_type)
            copy = self.add_copy(mapped)
            x = self.add_reader(copy, [mapped, copy, x])
        return x

    def add_self_seqmap(self) -> int:
        """`SequenceMap(f, x, x)`, or `f` of `x` and a Map of `x` (either order)."""
        rng = self.rng
        x = self.pick_sop()
        args = (x, x)
        if rng.random() < 0.5:
            fn = rng.choice(menu.matching(menu.UNARY + menu.MANY_TO_ONE, (self.info[x].vtype,)))
            mapped = self.add(Op("map", (x,), (fn.source, rng.random() < 0.5), False), fn.result_type)
            args = (mapped, x) if rng.random() < 0.5 else (x, mapped)
        choices = menu.matching(menu.BINARY, (self.info[args[0]].vtype, self.info[args[1]].vtype))
        if not choices:
            args = (x, x)
            choices = menu.matching(menu.BINARY, (self.info[x].vtype,) * 2)
        fn = rng.choice(choices)
        numerical = fn.result_type == "num" and rng.random() < self.chance(0.15)
        return self.add(Op("seqmap", args, (fn.source,), numerical), fn.result_type)

    def unused_before(self, last: int, limit: int) -> list[int]:
        """Up to `limit` of the most recent s-ops before `last` that nothing reads."""
        unused = [i for i in self.sops(lambda info: not info.used) if 2 <= i < last]
        return list(reversed(unused[-limit:]))

    def join(self, output: int, others: list[int]) -> int:
        """Combine each of `others` into `output` position-wise; returns the new output."""
        for other in others:
            types = (self.info[output].vtype, self.info[other].vtype)
            choices = menu.matching(menu.BINARY, types)
            if types == ("num", "num") and (self.info[output].numerical or self.info[other].numerical):
                op = Op("linmap", (output, other), (1, self.rng.choice([1, -1])), True)
                output = self.add(op, "num")
            elif choices:
                fn = self.rng.choice(choices)
                output = self.add(Op("seqmap", (output, other), (fn.source,)), fn.result_type)
        return output

    def add_lib(self) -> int:
        rng = self.rng
        name = rng.choice(LIB_PROGRAMS)
        n = self.max_seq_len
        if name in ("length", "hist"):
            return self.add(Op("lib", (), (name,)), "num")
        if name in ("count_less_freq", "sort_freq"):
            param = rng.choice([1, 2]) if name == "count_less_freq" else n
            return self.add(Op("lib", (), (name, param)), "num" if name != "sort_freq" else self.info[0].vtype)
        if name == "reverse":
            x = self.pick_sop()
            return self.add(Op("lib", (x,), (name,), self.info[x].numerical), self.info[x].vtype)
        if name == "frac_prevs":
            return self.add(Op("lib", (self.pick_sop("num"),), (name,), True), "num")
        if name in ("sort_unique", "sort"):
            vals = self.pick_sop(categorical=True)
            keys = self.pick_sop("num" if name == "sort" else None, categorical=True)
            params = (name,) if name == "sort_unique" else (name, n, rng.choice([1, 0.5]))
            return self.add(Op("lib", (vals, keys), params), self.info[vals].vtype)
        if name == "count":
            x = self.pick_sop(categorical=True)
            return self.add(Op("lib", (x,), (name, self.constant_for(x))), "num")
        if name == "detect_pattern":
            x = self.pick_sop(categorical=True)
            pattern = [self.constant_for(x) for _ in range(rng.choice([1, 2, 2, 3]))]
            return self.add(Op("lib", (x,), (name, pattern)), "num")
        if name == "pair_balance":
            x = self.pick_sop(categorical=True)
            return self.add(Op("lib", (x,), (name, self.constant_for(x), self.constant_for(x)), True), "num")
        # nary: f(a, b, c) over three s-ops of the function's argument types
        fn = rng.choice(menu.TERNARY)
        if fn.arg_types[0] == "str" and not self.sops(lambda info: info.vtype == "str"):
            fn = menu.TERNARY[0]
        args = tuple(self.pick_sop(t, categorical=True) for t in fn.arg_types)
        return self.add(Op("lib", args, (name, fn.source)), "num")


def generate(
    seed: int,
    size: int,
    vocab: Sequence[Any],
    max_seq_len: int,
    *,
    causal_guard: float = 0.35,
    kind_weights: dict[str, float] | None = None,
    numerical: float | None = None,
) -> ProgramSpec:
    """A random well-typed program of about `size` operations (selectors included).

    The result is pruned to what its output reads, so it can be somewhat smaller than `size`;
    the output is always the last s-op generated. `kind_weights` (default `KIND_WEIGHTS`) are the
    relative weights of the statement kinds; `numerical`, when given, is the probability that a
    Map, SequenceMap, LinearSequenceMap, Full, Aggregate or SelectorWidth is numerically encoded
    (default: a fixed probability per kind; LinearSequenceMaps of numerical inputs and Maps whose
    function returns strings keep their forced encoding).
    """
    if not 1 <= size <= 64:
        raise ValueError(f"size must be between 1 and 64, got {size}")
    rng = random.Random(seed)
    if numerical is not None and not 0.0 <= numerical <= 1.0:
        raise ValueError(f"numerical must be a probability in [0, 1], got {numerical}")
    builder = _Builder(rng, sorted(set(vocab), key=repr), max_seq_len, causal_guard, numerical)
    weights = kind_weights or KIND_WEIGHTS
    kinds, kind_p = list(weights), list(weights.values())
    adders = {
        "map": builder.add_map,
        "seqmap": builder.add_seqmap,
        "linmap": builder.add_linmap,
        "full": builder.add_full,
        "aggregate": builder.add_aggregate,
        "width": builder.add_width,
        "shift": builder.add_shift,
        "lib": builder.add_lib,
        "chain": builder.add_chain,
        "selfseq": builder.add_self_seqmap,
    }
    last = 0
    while len(builder.ops) - 2 < size:
        kind = rng.choices(kinds, kind_p)[0]
        if kind == "full" and len(builder.ops) - 2 >= size - 1:
            continue  # a Full as the output would ignore the input
        last = adders[kind]()
    if last < 2 or builder.ops[last].kind == "full":
        last = builder.add_map()
    last = builder.join(last, builder.unused_before(last, limit=2))
    spec = prune(ProgramSpec(tuple(builder.ops[: last + 1])))
    if not any(0 in op.args for op in spec.ops) and not _reads_tokens_via_lib(spec):
        last = builder.join(last, [0])  # a program must read its input
        spec = prune(ProgramSpec(tuple(builder.ops[: last + 1])))
    return spec


def _reads_tokens_via_lib(spec: ProgramSpec) -> bool:
    """Library programs without arguments (length, hist, ...) read tokens themselves."""
    return any(op.kind == "lib" and not op.args for op in spec.ops)
