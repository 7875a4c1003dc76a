"""Value inference: the finite set of values every s-op can take.

For a vocabulary and a maximum length every s-op takes finitely many values. Categorical s-ops
need the set to lay out their one-hot subspace; numerical s-ops need it so MLPs reading them can
be exact on every reachable input (a numerical Aggregate can produce any mean of a bag of its
input values, e.g. 2/3 after `frac_prevs`, and the MLPs downstream must know it).

The result is stored on the graph: `VALUE_SET` (a frozenset without `None`), `NULLABLE`
(whether the s-op can be `None` at a real position) and `BY_POSITION` (per-position value sets
where the s-op's values are tied to positions, `compiler.passes.positional`, else None; `VALUE_SET` is
then their union, a tighter sound set).
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
from compiler.passes.positional import infer_positional
from rasp import rasp

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
    fixed: Mapping[str, tuple[frozenset, bool]] | None = None,
) -> None:
    """Annotate every s-op node of `graph` with `VALUE_SET` and `NULLABLE`.

    `fixed` gives some nodes their `(value set, nullable)` instead of inferring them (a loop's
    state, whose values come from every iteration, `compiler.passes.loops`); the nodes reading
    them are inferred from those sets.
    """
    vocab_set = frozenset(vocab)
    for label in g.sop_nodes(graph):
        node = graph.nodes[label]
        if fixed is not None and label in fixed:
            value_set, nullable = fixed[label]
            node[nodes.VALUE_SET], node[nodes.NULLABLE], node[nodes.BY_POSITION] = frozenset(value_set), nullable, None
            continue
        positional = infer_positional(graph, node, vocab_set, max_seq_len, _call)
        if positional is not None:
            by_position, nullable = positional
            value_set = _checked(node[nodes.EXPR], set().union(*by_position), rasp.is_numerical(node[nodes.EXPR]))
            node[nodes.BY_POSITION] = by_position
        else:
            value_set, nullable = _infer_node(graph, node, vocab_set, max_seq_len)
            node[nodes.BY_POSITION] = None
        if len(value_set) > MAX_VALUE_SET_SIZE and node[nodes.KIND] in ELEMENTWISE_KINDS:
            through_cone = _apply_cone(graph, node[nodes.EXPR], rasp.is_numerical(node[nodes.EXPR]))
            if through_cone is not None:
                (value_set, nullable), node[nodes.BY_POSITION] = through_cone, None
        if len(value_set) > MAX_VALUE_SET_SIZE:
            raise ValueInferenceError(
                f"{label}: its value set has {len(value_set)} values, more than the limit of "
                f"{MAX_VALUE_SET_SIZE}; reduce the vocabulary or max_seq_len, or round the "
                "values the s-op produces"
            )
        node[nodes.VALUE_SET] = frozenset(value_set)
        node[nodes.NULLABLE] = nullable


def _infer_node(
    graph: nx.DiGraph, node: dict, vocab: frozenset, max_seq_len: int
) -> tuple[set, bool]:
    expr = node[nodes.EXPR]
    kind = node[nodes.KIND]
    numerical = rasp.is_numerical(expr)
    if kind is g.NodeKind.TOKENS:
        return _checked(expr, set(vocab), numerical), False
    if kind is g.NodeKind.INDICES:
        return set(range(max_seq_len)), False
    if kind is g.NodeKind.FULL:
        return _checked(expr, {expr.fill}, numerical), expr.fill is None
    if kind is g.NodeKind.CONSTANT:
        values = [v for v in expr.value]
        return _checked(expr, {v for v in values if v is not None}, numerical), None in values
    if kind is g.NodeKind.MAP:
        inner = graph.nodes[expr.inner.label]
        return _apply_unary(expr, expr.f, inner[nodes.VALUE_SET], inner[nodes.NULLABLE], numerical)
    if kind is g.NodeKind.SEQUENCE_MAP and sums.is_sum(expr):
        return _sum_values(graph, expr, max_seq_len)
    if kind in (g.NodeKind.SEQUENCE_MAP, g.NodeKind.LINEAR_SEQUENCE_MAP):
        fst = graph.nodes[expr.fst.label]
        snd = graph.nodes[expr.snd.label]
        if (
            kind is g.NodeKind.LINEAR_SEQUENCE_MAP
            and numerical
            and _all_numbers(fst[nodes.VALUE_SET] | snd[nodes.VALUE_SET])
        ):
            return _linear_combinations(expr, fst, snd, numerical)
        return _apply_binary(graph, expr, fst, snd, numerical)
    if kind is g.NodeKind.AGGREGATE:
        sop = graph.nodes[expr.sop.label]
        may_be_empty = not _always_selects(graph, expr)
        if numerical:
            means = bag_means(expr, sop[nodes.VALUE_SET], max_seq_len)
            if may_be_empty and expr.default is not None:
                means.add(expr.default)
            return _checked(expr, means, True), may_be_empty and expr.default is None
        values = set(sop[nodes.VALUE_SET])
        if may_be_empty and expr.default is not None:
            values.add(expr.default)
        nullable = (sop[nodes.NULLABLE] and not _selects_defined_keys(expr)) or (may_be_empty and expr.default is None)
        return _checked(expr, values, False), nullable
    if kind is g.NodeKind.SELECTOR_WIDTH:
        return set(range(max_seq_len + 1)), False
    raise ValueInferenceError(f"{expr.label}: cannot infer values of a {kind} node")


def _sum_values(graph: nx.DiGraph, expr: rasp.SequenceMap, max_seq_len: int) -> tuple[set, bool]:
    """Values of an expanded SumAggregate (`compiler.passes.sums`): the sums of bags of the summed
    s-op's values, and the default where the selector may select nothing."""
    mean = graph.nodes[expr.fst.label]
    aggregate = mean[nodes.EXPR]
    sop = graph.nodes[aggregate.sop.label]
    found = bag_sums(aggregate, sop[nodes.VALUE_SET], max_seq_len)
    may_be_empty = not _always_selects(graph, aggregate)
    if may_be_empty and aggregate.default is not None:
        found.add(aggregate.default)
    return _checked(expr, found, rasp.is_numerical(expr)), mean[nodes.NULLABLE]


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


def _apply_unary(
    expr: rasp.SOp, f: Callable, inputs: frozenset, nullable_in: bool, numerical: bool
) -> tuple[set, bool]:
    outputs: set = set()
    nullable = nullable_in
    for x in _sorted(inputs):
        y = _call(expr, f, (x,))
        if y is None:
            nullable = True
        else:
            outputs.add(y)
    return _checked(expr, outputs, numerical), nullable


def _apply_binary(
    graph: nx.DiGraph, expr: rasp.SOp, fst: dict, snd: dict, numerical: bool
) -> tuple[set, bool]:
    xs, ys = _sorted(fst[nodes.VALUE_SET]), _sorted(snd[nodes.VALUE_SET])
    if expr.fst.label == expr.snd.label:  # f(x, x): only the diagonal occurs
        outputs = {z for z in (_call(expr, expr.f, (x, x)) for x in xs)}
        nullable = fst[nodes.NULLABLE] or None in outputs
        return _checked(expr, outputs - {None}, numerical), nullable
    if len(xs) * len(ys) > MAX_VALUE_SET_SIZE:
        through_cone = _apply_cone(graph, expr, numerical)
        if through_cone is not None:
            return through_cone
        raise ValueInferenceError(
            f"{expr.label}: combines {len(xs)} x {len(ys)} input values, more than the limit of "
            f"{MAX_VALUE_SET_SIZE} evaluations; reduce the inputs' value sets first (e.g. a Map "
            "that buckets values) or shrink vocab / max_seq_len"
        )
    outputs: set = set()
    nullable = fst[nodes.NULLABLE] or snd[nodes.NULLABLE]
    for x in xs:
        for y in ys:
            z = _call(expr, expr.f, (x, y))
            if z is None:
                nullable = True
            else:
                outputs.add(z)
    return _checked(expr, outputs, numerical), nullable


ELEMENTWISE_KINDS = (g.NodeKind.MAP, g.NodeKind.SEQUENCE_MAP, g.NodeKind.LINEAR_SEQUENCE_MAP)


def elementwise_cone(graph: nx.DiGraph, label: str) -> tuple[tuple[str, ...], Callable]:
    """`(sources, F)`: the s-ops a chain of elementwise operations ending at `label` starts from,
    and the function computing `label`'s value from theirs at one position.

    Every Map / SequenceMap above `label` is expanded into its inputs, down to the first s-ops
    that are not elementwise (tokens, indices, Aggregates, ...); each source is listed once, so
    an s-op read twice in the chain (e.g. `SequenceMap(Map(f, x), x)`) contributes one value, not
    two independent ones. `F` propagates None as the evaluator does (an operation with a None
    input gives None).
    """
    sources: dict[str, int] = {}

    def build(name: str) -> Callable[[tuple], Any]:
        node = graph.nodes[name]
        if node[nodes.KIND] not in ELEMENTWISE_KINDS:
            slot = sources.setdefault(name, len(sources))
            return lambda values: values[slot]
        expr = node[nodes.EXPR]
        if node[nodes.KIND] is g.NodeKind.MAP:
            inner, f = build(expr.inner.label), expr.f

            def unary(values: tuple) -> Any:
                x = inner(values)
                return None if x is None else _call(expr, f, (x,))

            return unary
        first, second, f = build(expr.fst.label), build(expr.snd.label), expr.f

        def binary(values: tuple) -> Any:
            x, y = first(values), second(values)
            return None if x is None or y is None else _call(expr, f, (x, y))

        return binary

    function = build(label)
    return tuple(sources), function


def _apply_cone(graph: nx.DiGraph, expr: rasp.SOp, numerical: bool) -> tuple[set, bool] | None:
    """Values of an elementwise s-op enumerated over the sources of its elementwise cone.

    Sound (the sources' value sets bound what they take together at one position) and never
    looser than combining the direct inputs' sets; used when that direct combination is over
    the limit, e.g. for tuple-packing chains that read one s-op twice (`make_nary_sequencemap`).
    None (the caller refuses) when the sources' combinations are over the limit too.
    """
    sources, function = elementwise_cone(graph, expr.label)
    choices = []
    for source in sources:
        node = graph.nodes[source]
        choices.append(_sorted(node[nodes.VALUE_SET]) + ([None] if node[nodes.NULLABLE] else []))
    if math.prod(len(c) for c in choices) > MAX_VALUE_SET_SIZE:
        return None
    outputs = {function(values) for values in itertools.product(*choices)}
    return _checked(expr, outputs - {None}, numerical), None in outputs


def _all_numbers(values: frozenset) -> bool:
    return all(_is_number(v) for v in values)


# Largest number of (x, y) pairs the vectorised LinearSequenceMap inference enumerates.
MAX_LINEAR_PAIRS = 4_000_000


def _linear_combinations(
    expr: rasp.LinearSequenceMap, fst: dict, snd: dict, numerical: bool
) -> tuple[set, bool]:
    """Values of `fst_fac * x + snd_fac * y`, vectorised (same float64 operations as RASP).

    When both inputs are the same s-op only the diagonal `x == y` occurs.
    """
    xs = np.array(sorted(float(v) for v in fst[nodes.VALUE_SET]))
    ys = np.array(sorted(float(v) for v in snd[nodes.VALUE_SET]))
    if expr.fst.label == expr.snd.label:
        values = np.unique(expr.fst_fac * xs + expr.snd_fac * xs)
    elif xs.size * ys.size > MAX_LINEAR_PAIRS:
        raise ValueInferenceError(
            f"{expr.label}: combines {xs.size} x {ys.size} input values, more than the limit of "
            f"{MAX_LINEAR_PAIRS:,} pairs; give {expr.fst.label} / {expr.snd.label} fewer values "
            "(round them) or shrink vocab / max_seq_len"
        )
    else:
        values = np.unique((expr.fst_fac * xs[:, None] + expr.snd_fac * ys[None, :]).ravel())
    return _checked(expr, set(values.tolist()), numerical), fst[nodes.NULLABLE] or snd[nodes.NULLABLE]


def _bag_sums(expr: rasp.SOp, values: frozenset, max_seq_len: int, what: str = "means") -> Iterator[tuple[int, np.ndarray]]:
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


def bag_means(expr: rasp.SOp, values: frozenset, max_seq_len: int) -> set:
    """Every mean of a non-empty bag of at most `max_seq_len` elements drawn from `values`.

    Means are `sum / n` in float64, the same numbers the evaluator's `sum(values) / len(values)`
    produces for integer-like values.
    """
    means: set = set()
    for n, sums in _bag_sums(expr, values, max_seq_len):
        means.update((sums / n).tolist())
        if len(means) > MAX_VALUE_SET_SIZE:
            break
    if len(means) > MAX_VALUE_SET_SIZE:
        raise ValueInferenceError(
            f"{expr.label}: means of up to {max_seq_len} values of {expr.sop.label} take more "
            f"than {MAX_VALUE_SET_SIZE} distinct values; give {expr.sop.label} fewer or "
            "integer-spaced values, or lower max_seq_len"
        )
    return means


def bag_sums(expr: rasp.SOp, values: frozenset, max_seq_len: int) -> set:
    """Every sum of a non-empty bag of at most `max_seq_len` elements drawn from `values` (the
    values a SumAggregate takes where it selects something). Integer inputs give integers."""
    integers = all(isinstance(v, (bool, int, np.integer)) for v in values)
    found: set = set()
    for _, sums in _bag_sums(expr, values, max_seq_len, what="sums"):
        found.update([int(x) for x in sums.tolist()] if integers else sums.tolist())
        if len(found) > MAX_VALUE_SET_SIZE:
            raise ValueInferenceError(
                f"{expr.label}: sums of up to {max_seq_len} values of {expr.sop.label} take more "
                f"than {MAX_VALUE_SET_SIZE} distinct values; give {expr.sop.label} fewer or "
                "integer-spaced values, or lower max_seq_len"
            )
    return found


def _call(expr: rasp.SOp, f: Callable, args: tuple) -> Any:
    try:
        result = f(*args)
    except Exception as error:  # noqa: BLE001 - any user failure is reported with context
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
