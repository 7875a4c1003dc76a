"""Value inference: the finite set of values every s-op can take.

For a vocabulary and a maximum length every s-op takes finitely many values. Categorical s-ops
need the set to lay out their one-hot subspace; numerical s-ops need it so MLPs reading them can
be exact on every reachable input (a numerical Aggregate can produce any mean of a bag of its
input values, e.g. 2/3 after `frac_prevs`, and the MLPs downstream must know it).

The result is stored on the graph: `VALUE_SET` (a frozenset without `None`), `NULLABLE`
(whether the s-op can be `None` at a real position), `BY_POSITION` (per-position value sets
where the s-op's values are tied to positions, `compiler.passes.positional`, else None; `VALUE_SET` is
then their union, a tighter sound set) and `VARIANTS` (the values the s-op can take with more
than one Python type, `compiler.passes.variants`; usually empty).

Values keep the Python types the evaluator gives them, because functions see them: a
`LinearSequenceMap` of ints is an int (`compiler.passes.arithmetic`), a numerical mean is a
float (`sum(...) / len(...)`), a SumAggregate of ints an int, a SelectorWidth an int, a default
its own type. Every Map, SequenceMap and Select predicate is called on every variant of the
values it reads; one that gives different results for equal values of different types is
refused (`compiler.passes.variants`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import networkx as nx
import numpy as np

from compiler.errors import UnsupportedProgramError, ValueInferenceError
from compiler.passes import graph as g
from compiler.passes import nodes, selectors, sums
from compiler.passes.arithmetic import linear_values
from compiler.passes.positional import infer_positional
from compiler.passes.variants import NO_VARIANTS, Collector, Variants, check_select, choices, results
from rasp import rasp

# What inference finds for one s-op: its values, whether it can be None, and its variants.
Inferred = tuple[set, bool, dict]

# Largest value set (or number of function evaluations) value inference accepts. Beyond it the
# residual stream and the MLPs reading the s-op would be impractically large.
MAX_VALUE_SET_SIZE = 100_000

# Most pairwise sums `bag_means` builds in one step (a sumset table); a dense float value set
# beyond it would take minutes to enumerate and almost surely exceed MAX_VALUE_SET_SIZE anyway.
MAX_SUMSET_WORK = 4_000_000


def infer_values(
    graph: nx.DiGraph,
    vocab: Iterable[Any],
    max_seq_len: int,
    fixed: Mapping[str, tuple[frozenset, bool, Variants]] | None = None,
) -> None:
    """Annotate every s-op node of `graph` with `VALUE_SET`, `NULLABLE`, `BY_POSITION` and
    `VARIANTS`, and check every Select's predicate on the variants of its keys and queries.

    `fixed` gives some nodes their `(value set, nullable, variants)` instead of inferring them
    (a loop's state, whose values come from every iteration, `compiler.passes.loops`); the
    nodes reading them are inferred from those sets.

    Raises:
      ValueInferenceError: a value set over the limit, a function that fails or returns what
        cannot be encoded, or a function or predicate that gives different results for equal
        values of different types (module docstring).
    """
    vocab_set = frozenset(vocab)
    for label in nx.lexicographical_topological_sort(graph):
        node = graph.nodes[label]
        if node[nodes.KIND] is g.NodeKind.SELECT:
            _check_select(graph, node[nodes.EXPR])
            continue
        if not isinstance(node[nodes.EXPR], rasp.SOp):
            continue
        if fixed is not None and label in fixed:
            fixed_values, fixed_nullable, fixed_variants = fixed[label]
            node[nodes.VALUE_SET], node[nodes.NULLABLE], node[nodes.BY_POSITION] = frozenset(fixed_values), fixed_nullable, None
            node[nodes.VARIANTS] = dict(fixed_variants)
            continue
        positional = infer_positional(graph, node, vocab_set, max_seq_len, _call)
        if positional is not None:
            by_position, nullable, variants = positional
            value_set = _checked(node[nodes.EXPR], set().union(*by_position), rasp.is_numerical(node[nodes.EXPR]))
            node[nodes.BY_POSITION] = by_position
        else:
            value_set, nullable, variants = _infer_node(graph, node, vocab_set, max_seq_len)
            node[nodes.BY_POSITION] = None
        if len(value_set) > MAX_VALUE_SET_SIZE and node[nodes.KIND] in ELEMENTWISE_KINDS:
            through_cone = _apply_cone(graph, node[nodes.EXPR], rasp.is_numerical(node[nodes.EXPR]))
            if through_cone is not None:
                (value_set, nullable, variants), node[nodes.BY_POSITION] = through_cone, None
        if len(value_set) > MAX_VALUE_SET_SIZE:
            raise ValueInferenceError(
                f"{label}: its value set has {len(value_set)} values, more than the limit of "
                f"{MAX_VALUE_SET_SIZE}; reduce the vocabulary or max_seq_len, or round the "
                "values the s-op produces"
            )
        node[nodes.VALUE_SET] = frozenset(value_set)
        node[nodes.NULLABLE] = nullable
        node[nodes.VARIANTS] = variants


def _variants(node: dict) -> Variants:
    return node.get(nodes.VARIANTS) or NO_VARIANTS


def _check_select(graph: nx.DiGraph, expr: rasp.Select) -> None:
    """Refuse a Select whose predicate tells variants of its keys or queries apart."""
    keys, queries = graph.nodes[expr.keys.label], graph.nodes[expr.queries.label]
    check_select(
        expr.label,
        expr.predicate,
        (expr.keys.label, keys[nodes.VALUE_SET], _variants(keys)),
        (expr.queries.label, queries[nodes.VALUE_SET], _variants(queries)),
    )


def _infer_node(graph: nx.DiGraph, node: dict, vocab: frozenset, max_seq_len: int) -> Inferred:
    expr = node[nodes.EXPR]
    kind = node[nodes.KIND]
    numerical = rasp.is_numerical(expr)
    if kind is g.NodeKind.TOKENS:
        return _checked(expr, set(vocab), numerical), False, {}
    if kind is g.NodeKind.INDICES:
        return set(range(max_seq_len)), False, {}
    if kind is g.NodeKind.FULL:
        return _checked(expr, {expr.fill} - {None}, numerical), expr.fill is None, {}
    if kind is g.NodeKind.CONSTANT:
        found = Collector()
        for value in expr.value:
            if value is not None:
                found.add(value)
        return _checked(expr, found.values, numerical), None in expr.value, found.variants
    if kind is g.NodeKind.MAP:
        return _apply_unary(expr, expr.f, graph.nodes[expr.inner.label], numerical)
    if kind is g.NodeKind.SEQUENCE_MAP and sums.is_sum(expr):
        return _sum_values(graph, expr, max_seq_len)
    if kind in (g.NodeKind.SEQUENCE_MAP, g.NodeKind.LINEAR_SEQUENCE_MAP):
        fst = graph.nodes[expr.fst.label]
        snd = graph.nodes[expr.snd.label]
        if kind is g.NodeKind.LINEAR_SEQUENCE_MAP and numerical:
            linear = _linear_combinations(expr, fst, snd, numerical)
            if linear is not None:
                return linear
        return _apply_binary(graph, expr, fst, snd, numerical)
    if kind is g.NodeKind.AGGREGATE:
        sop = graph.nodes[expr.sop.label]
        may_be_empty = not _always_selects(graph, expr)
        found = Collector()
        if numerical:  # means: `sum(...) / len(...)`, a float
            found.add_all(bag_means(expr, sop[nodes.VALUE_SET], max_seq_len), float)
            if may_be_empty and expr.default is not None:
                found.add(expr.default)
            return _checked(expr, found.values, True), may_be_empty and expr.default is None, found.variants
        found.add_variants(sop[nodes.VALUE_SET], _variants(sop))  # the selected value itself
        if may_be_empty and expr.default is not None:
            found.add(expr.default)
        nullable = (sop[nodes.NULLABLE] and not _selects_defined_keys(expr)) or (may_be_empty and expr.default is None)
        return _checked(expr, found.values, False), nullable, found.variants
    if kind is g.NodeKind.SELECTOR_WIDTH:
        return set(range(max_seq_len + 1)), False, {}
    raise ValueInferenceError(f"{expr.label}: cannot infer values of a {kind} node")


def _sum_values(graph: nx.DiGraph, expr: rasp.SequenceMap, max_seq_len: int) -> Inferred:
    """Values of an expanded SumAggregate (`compiler.passes.sums`): the sums of bags of the summed
    s-op's values (of the types Python's `sum` gives them), and the default where the selector
    may select nothing."""
    mean = graph.nodes[expr.fst.label]
    aggregate = mean[nodes.EXPR]
    sop = graph.nodes[aggregate.sop.label]
    found = bag_sums(aggregate, sop[nodes.VALUE_SET], max_seq_len, _variants(sop))
    may_be_empty = not _always_selects(graph, aggregate)
    if may_be_empty and aggregate.default is not None:
        found.add(aggregate.default)
    return _checked(expr, found.values, rasp.is_numerical(expr)), mean[nodes.NULLABLE], found.variants


def _always_selects(graph: nx.DiGraph, expr: rasp.Aggregate) -> bool:
    """Whether the Aggregate's selector provably selects something for every query.

    An unsupported selector counts as possibly empty; validation reports it separately.
    """
    try:
        leaves = selectors.conjunction(expr.selector)
        return selectors.always_selects(graph, expr.label, leaves)
    except UnsupportedProgramError:
        return False


def _selects_defined_keys(expr: rasp.Aggregate) -> bool:
    """Whether the Aggregate selects only keys where its s-op is not None: its selector's
    conjunction has a leaf, not negated, whose keys are that s-op (a `Select` never selects a
    None key), e.g. `compiler.passes.joint_selectors.defined_or_absent`."""
    try:
        leaves = selectors.conjunction(expr.selector)
    except UnsupportedProgramError:
        return False
    return any(leaf.keys == expr.sop.label and not selectors.selects_none(leaf.predicate) for leaf in leaves)


def _caller(expr: rasp.SOp, f: Callable) -> Callable[[tuple], Any]:
    return lambda args: _call(expr, f, args)


def _gather(found: Collector, outputs: Iterable[Any]) -> bool:
    """Add every output that is not None to ``found``; whether one was None."""
    saw_none = False
    for y in outputs:
        if y is None:
            saw_none = True
        else:
            found.add(y)
    return saw_none


def _apply_unary(expr: rasp.Map, f: Callable, inner: dict, numerical: bool) -> Inferred:
    found = Collector()
    nullable = inner[nodes.NULLABLE]
    variants = _variants(inner)
    ys: Iterable[Any]
    for x in _sorted(inner[nodes.VALUE_SET]):
        if variants and x in variants:
            ys = results(expr.label, (expr.inner.label,), (x,), (variants[x],), _caller(expr, f))
        else:
            ys = (_call(expr, f, (x,)),)
        nullable = _gather(found, ys) or nullable
    return _checked(expr, found.values, numerical), nullable, found.variants


def _apply_binary(graph: nx.DiGraph, expr: rasp.SequenceMap, fst: dict, snd: dict, numerical: bool) -> Inferred:
    xs, ys = _sorted(fst[nodes.VALUE_SET]), _sorted(snd[nodes.VALUE_SET])
    x_variants, y_variants = _variants(fst), _variants(snd)
    labels = (expr.fst.label, expr.snd.label)
    found = Collector()
    zs: Iterable[Any]
    if expr.fst.label == expr.snd.label:  # f(x, x): only the diagonal occurs
        nullable = fst[nodes.NULLABLE]
        for x in xs:
            if x_variants and x in x_variants:
                zs = results(expr.label, labels, (x, x), (x_variants[x], None), _caller(expr, expr.f), diagonal=True)
            else:
                zs = (_call(expr, expr.f, (x, x)),)
            nullable = _gather(found, zs) or nullable
        return _checked(expr, found.values, numerical), nullable, found.variants
    if len(xs) * len(ys) > MAX_VALUE_SET_SIZE:
        through_cone = _apply_cone(graph, expr, numerical)
        if through_cone is not None:
            return through_cone
        raise ValueInferenceError(
            f"{expr.label}: combines {len(xs)} x {len(ys)} input values, more than the limit of "
            f"{MAX_VALUE_SET_SIZE} evaluations; reduce the inputs' value sets first (e.g. a Map "
            "that buckets values) or shrink vocab / max_seq_len"
        )
    nullable = fst[nodes.NULLABLE] or snd[nodes.NULLABLE]
    any_variants = bool(x_variants or y_variants)
    for x in xs:
        x_options = x_variants.get(x) if x_variants else None
        for y in ys:
            y_options = y_variants.get(y) if any_variants and y_variants else None
            if x_options is None and y_options is None:
                zs = (_call(expr, expr.f, (x, y)),)
            else:
                zs = results(expr.label, labels, (x, y), (x_options, y_options), _caller(expr, expr.f))
            nullable = _gather(found, zs) or nullable
    return _checked(expr, found.values, numerical), nullable, found.variants


ELEMENTWISE_KINDS = (g.NodeKind.MAP, g.NodeKind.SEQUENCE_MAP, g.NodeKind.LINEAR_SEQUENCE_MAP)


def elementwise_cone(
    graph: nx.DiGraph, label: str, check_variants: bool = False
) -> tuple[tuple[str, ...], Callable]:
    """`(sources, F)`: the s-ops a chain of elementwise operations ending at `label` starts from,
    and the function computing `label`'s value from theirs at one position.

    Every Map / SequenceMap above `label` is expanded into its inputs, down to the first s-ops
    that are not elementwise (tokens, indices, Aggregates, ...); each source is listed once, so
    an s-op read twice in the chain (e.g. `SequenceMap(Map(f, x), x)`) contributes one value, not
    two independent ones. `F` propagates None as the evaluator does (an operation with a None
    input gives None). With `check_variants`, `label`'s own function is also checked on the
    variants of the values its direct inputs hold (`compiler.passes.variants.results`), once per
    pair of equality classes; the chain below was checked when its nodes were inferred.
    """
    sources: dict[str, int] = {}

    def checker(expr: rasp.SOp, labels: tuple[str, ...], f: Callable) -> Callable[[tuple], None] | None:
        options = [_variants(graph.nodes[name]) for name in labels]
        if not check_variants or not any(options):
            return None
        seen: set = set()
        diagonal = len(labels) == 2 and labels[0] == labels[1]

        def check(args: tuple) -> None:
            if args not in seen:
                seen.add(args)
                found = tuple(o.get(a) if o else None for o, a in zip(options, args))
                if any(found):
                    results(expr.label, labels, args, found, _caller(expr, f), diagonal=diagonal)

        return check

    def build(name: str, root: bool) -> Callable[[tuple], Any]:
        node = graph.nodes[name]
        if node[nodes.KIND] not in ELEMENTWISE_KINDS:
            slot = sources.setdefault(name, len(sources))
            return lambda values: values[slot]
        expr = node[nodes.EXPR]
        if node[nodes.KIND] is g.NodeKind.MAP:
            inner, f = build(expr.inner.label, False), expr.f
            check = checker(expr, (expr.inner.label,), f) if root else None

            def unary(values: tuple) -> Any:
                x = inner(values)
                if x is None:
                    return None
                if check is not None:
                    check((x,))
                return _call(expr, f, (x,))

            return unary
        first, second, f = build(expr.fst.label, False), build(expr.snd.label, False), expr.f
        check = checker(expr, (expr.fst.label, expr.snd.label), f) if root else None

        def binary(values: tuple) -> Any:
            x, y = first(values), second(values)
            if x is None or y is None:
                return None
            if check is not None:
                check((x, y))
            return _call(expr, f, (x, y))

        return binary

    function = build(label, True)
    return tuple(sources), function


def _apply_cone(graph: nx.DiGraph, expr: rasp.SOp, numerical: bool) -> Inferred | None:
    """Values of an elementwise s-op enumerated over the sources of its elementwise cone.

    Sound (the sources' value sets bound what they take together at one position) and never
    looser than combining the direct inputs' sets; used when that direct combination is over
    the limit, e.g. for tuple-packing chains that read one s-op twice (`make_nary_sequencemap`).
    Every variant of a source's values is a separate choice, so the chain computes what the
    evaluator computes, types included. None (the caller refuses) when the sources'
    combinations are over the limit too.
    """
    sources, function = elementwise_cone(graph, expr.label, check_variants=True)
    options = []
    for source in sources:
        node = graph.nodes[source]
        variants = _variants(node)
        taken = [v for x in _sorted(node[nodes.VALUE_SET]) for v in choices(variants, x)]
        options.append(taken + ([None] if node[nodes.NULLABLE] else []))
    if math.prod(len(c) for c in options) > MAX_VALUE_SET_SIZE:
        return None
    found = Collector()
    nullable = False
    for values in itertools.product(*options):
        z = function(values)
        if z is None:
            nullable = True
        else:
            found.add(z)
    return _checked(expr, found.values, numerical), nullable, found.variants


# Largest number of (x, y) pairs the vectorised LinearSequenceMap inference enumerates.
MAX_LINEAR_PAIRS = 4_000_000


def _linear_combinations(expr: rasp.LinearSequenceMap, fst: dict, snd: dict, numerical: bool) -> Inferred | None:
    """Values of `fst_fac * x + snd_fac * y`, vectorised with the types Python's arithmetic
    gives them (`compiler.passes.arithmetic`); None where that does not apply (values that are
    no plain numbers), so the caller calls the function itself.

    When both inputs are the same s-op only the diagonal `x == y` occurs. Pairs with a variant
    are computed by calling the function on every variant (`compiler.passes.variants`).
    """
    diagonal = expr.fst.label == expr.snd.label
    x_variants, y_variants = _variants(fst), _variants(snd)
    xs = [v for x in fst[nodes.VALUE_SET] for v in choices(x_variants, x)]
    ys = xs if diagonal else [v for y in snd[nodes.VALUE_SET] for v in choices(y_variants, y)]
    if not diagonal and len(xs) * len(ys) > MAX_LINEAR_PAIRS:
        raise ValueInferenceError(
            f"{expr.label}: combines {len(xs)} x {len(ys)} input values, more than the limit of "
            f"{MAX_LINEAR_PAIRS:,} pairs; give {expr.fst.label} / {expr.snd.label} fewer values "
            "(round them) or shrink vocab / max_seq_len"
        )
    blocks = linear_values(expr.fst_fac, expr.snd_fac, xs, ys, diagonal)
    if blocks is None:
        return None
    found = Collector()
    for kind, values in blocks:
        found.add_all(values, kind)
    if x_variants or y_variants:  # equal results for every variant, or refused
        labels = (expr.fst.label, expr.snd.label)
        for x in x_variants:
            for y in ([x] if diagonal else snd[nodes.VALUE_SET]):
                options = (x_variants[x], None if diagonal else y_variants.get(y))
                results(expr.label, labels, (x, y), options, _caller(expr, expr.f), diagonal=diagonal)
        if not diagonal:
            for y in y_variants:
                for x in fst[nodes.VALUE_SET]:
                    results(expr.label, labels, (x, y), (x_variants.get(x), y_variants[y]), _caller(expr, expr.f))
    return _checked(expr, found.values, numerical), fst[nodes.NULLABLE] or snd[nodes.NULLABLE], found.variants


def _bag_sums(expr: rasp.Aggregate | rasp.SumAggregate, values: frozenset, max_seq_len: int, what: str = "means") -> Iterator[tuple[int, np.ndarray]]:
    """`(n, sums)` for n = 1 .. `max_seq_len`: every sum of a bag of n elements of `values`.

    Sumsets (the achievable sums of n elements), which stay small for the integer-like values
    programs use, instead of enumerating bags; each step refuses before building a table that is
    too large.
    """
    try:
        base = np.array(sorted({float(v) for v in values}), dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueInferenceError(
            f"{expr.label}: a numerical Aggregate needs numeric values, but {expr.sop.label} "
            f"takes {sorted(map(repr, values))}; aggregate a numerical s-op"
        ) from error
    if base.size == 0:
        return
    too_many = ValueInferenceError(
        f"{expr.label}: {what} of up to {max_seq_len} values of {expr.sop.label} take "
        f"more than {MAX_VALUE_SET_SIZE} distinct values; give {expr.sop.label} fewer or "
        "integer-spaced values, or lower max_seq_len"
    )
    sums = np.zeros(1)
    for n in range(1, max_seq_len + 1):
        # Refuse before building the |sums| x |base| table when the answer is already known:
        # a sumset of reals has at least |sums| + |base| - 1 elements. (Without this, dense
        # float value sets took minutes to refuse.)
        if sums.size + base.size - 1 > MAX_VALUE_SET_SIZE:
            raise too_many
        if sums.size * base.size > MAX_SUMSET_WORK:
            raise ValueInferenceError(
                f"{expr.label}: enumerating the {what} of up to {max_seq_len} values of "
                f"{expr.sop.label} ({base.size} distinct values) needs more than "
                f"{MAX_SUMSET_WORK} sums; give {expr.sop.label} fewer or integer-spaced values, "
                "or lower max_seq_len"
            )
        sums = np.unique((sums[:, None] + base[None, :]).ravel())
        if sums.size > MAX_VALUE_SET_SIZE:
            raise too_many
        yield n, sums


def bag_means(expr: rasp.Aggregate, values: frozenset, max_seq_len: int) -> set:
    """Every mean of a non-empty bag of at most `max_seq_len` elements drawn from `values`.

    Means are `sum / n` in float64, the same numbers the evaluator's `sum(values) / len(values)`
    produces for integer-like values.
    """
    means: set = set()
    for n, totals in _bag_sums(expr, values, max_seq_len):
        means.update((totals / n).tolist())
        if len(means) > MAX_VALUE_SET_SIZE:
            break
    if len(means) > MAX_VALUE_SET_SIZE:
        raise ValueInferenceError(
            f"{expr.label}: means of up to {max_seq_len} values of {expr.sop.label} take more "
            f"than {MAX_VALUE_SET_SIZE} distinct values; give {expr.sop.label} fewer or "
            "integer-spaced values, or lower max_seq_len"
        )
    return means


def bag_sums(expr: rasp.Aggregate | rasp.SumAggregate, values: frozenset, max_seq_len: int, variants: Variants = NO_VARIANTS) -> Collector:
    """Every sum of a non-empty bag of at most `max_seq_len` elements drawn from `values` (the
    values a SumAggregate takes where it selects something), of the type Python's `sum` gives:
    an int for a bag of ints and bools, a float for a bag holding a float (`variants`: the
    values `values` holds with several types, each a possible element)."""
    elements = [v for x in values for v in choices(variants, x)]
    integers = frozenset(v for v in elements if isinstance(v, (bool, int, np.integer)))
    others = frozenset(v for v in elements if not isinstance(v, (bool, int, np.integer)))
    found = Collector()

    def add(sums: Iterable[Any], kind: type) -> None:
        found.add_all(sums, kind)
        if len(found.values) > MAX_VALUE_SET_SIZE:
            raise ValueInferenceError(
                f"{expr.label}: sums of up to {max_seq_len} values of {expr.sop.label} take more "
                f"than {MAX_VALUE_SET_SIZE} distinct values; give {expr.sop.label} fewer or "
                "integer-spaced values, or lower max_seq_len"
            )

    if integers:  # bags of ints only
        for _, sums in _bag_sums(expr, integers, max_seq_len, what="sums"):
            add([int(x) for x in sums.tolist()], int)
    if others:  # bags holding a float: one float plus a bag of at most max_seq_len - 1 of anything
        floats = np.array(sorted(float(v) for v in others))
        rests = itertools.chain([(0, np.zeros(1))], _bag_sums(expr, frozenset(elements), max_seq_len - 1, what="sums"))
        for _, sums in rests:
            if floats.size * sums.size > MAX_SUMSET_WORK:
                raise ValueInferenceError(
                    f"{expr.label}: enumerating the sums of up to {max_seq_len} values of "
                    f"{expr.sop.label} needs more than {MAX_SUMSET_WORK} sums; give "
                    f"{expr.sop.label} fewer or integer-spaced values, or lower max_seq_len"
                )
            add(np.unique((floats[:, None] + sums[None, :]).ravel()).tolist(), float)
    return found


def _call(expr: rasp.SOp, f: Callable, args: tuple) -> Any:
    try:
        result = f(*args)
    except Exception as error:
        shown = ", ".join(repr(a) for a in args)
        raise ValueInferenceError(
            f"{expr.label}: its function raised {type(error).__name__}: {error} on input "
            f"({shown}), a value the input can take; make the function handle it"
        ) from error
    try:
        hash(result)
    except TypeError as error:
        raise ValueInferenceError(
            f"{expr.label}: its function returned an unhashable {type(result).__name__} "
            f"({result!r}) on input {args!r}; return hashable values (e.g. a tuple)"
        ) from error
    if isinstance(result, float) and math.isnan(result):
        raise ValueInferenceError(
            f"{expr.label}: its function returned NaN on input {args!r}; NaN cannot be encoded"
        )
    return result


def _checked(expr: rasp.SOp, values: set, numerical: bool) -> set:
    """Reject values the encoding cannot hold (non-numbers in a numerical s-op, NaN)."""
    for value in values:
        if isinstance(value, float) and math.isnan(value):
            raise ValueInferenceError(f"{expr.label}: takes the value NaN, which cannot be encoded")
        if numerical and not _is_number(value):
            raise ValueInferenceError(
                f"{expr.label}: is numerical but takes the non-numeric value {value!r}; "
                "annotate it categorical or make it produce numbers"
            )
    return values


def _is_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float, np.integer, np.floating))


def _sorted(values: Iterable) -> list:
    """Deterministic order over mixed types (numbers first, then by type name and repr)."""
    def key(v: Any) -> tuple:
        if _is_number(v):
            return (0, float(v), "")
        return (1, type(v).__name__, repr(v))

    return sorted(values, key=key)
