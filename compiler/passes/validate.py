"""Find every reason a program cannot be compiled exactly, before compiling it.

`validate(program, vocab, max_seq_len, causal)` returns a list of messages (empty when the
program compiles exactly); `compile_rasp` raises one `UnsupportedProgramError` listing them all.
Each message starts with the offending s-op's label and says what to do instead.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import warnings
from collections.abc import Iterable
from typing import Any

import networkx as nx

from compiler.errors import CausalSemanticsWarning, CompilerError, UnsupportedProgramError
from compiler.passes import graph as g
from compiler.passes import joint_selectors, nodes, selectors
from compiler.passes.discretise import discretise_numerical_inputs
from compiler.passes.fuse import fuse_elementwise
from compiler.passes.joint_selectors import join_selectors
from compiler.passes.numerical_maps import fit_none_flag, fit_numerical_map, numerical_map_operation
from compiler.passes.optimize import fold_maps, optimize_graph, selected_passes
from compiler.passes.readout import trace_values
from compiler.passes.sums import expand_sums
from craft.bases import BasisDirection, bos_direction
from craft.chamber import numerical_mlp
from craft.chamber.numerical_fit import NUMERICAL_MAP_TOLERANCE, measurable_values
from rasp import rasp

# Graph attribute: labels of the s-ops whose selectors may select later positions, in causal mode.


def validate(
    program: rasp.SOp,
    vocab: Iterable[Any],
    max_seq_len: int,
    causal: bool = False,
    causal_strict: bool = False,
    optimize: bool | Iterable[str] = True,
) -> list[str]:
    """Every problem that stops `program` from compiling exactly (empty list: it compiles).

    `optimize` is `compile_rasp`'s: the optimisation passes can make a block small enough.

    With `causal=True` a selector that may select later positions is no problem: the model
    computes the causal evaluation. Such a program gets its note as a `CausalSemanticsWarning`
    (see `causal_notes`); with `causal_strict=True` it is a problem instead.
    """
    try:
        prepared = expand_sums(discretise_numerical_inputs(join_selectors(program)), max_seq_len)
        graph = trace_values(prepared, vocab, max_seq_len)
    except UnsupportedProgramError as error:
        return list(error.problems)
    except CompilerError as error:
        return [str(error)]
    problems = check_graph(
        graph, fuse_elementwise(graph), causal, causal_strict=causal_strict, passes=selected_passes(optimize)
    )
    if not problems:
        warn_causal_semantics(graph, stacklevel=3)
    return problems


def causal_notes(graph: nx.DiGraph) -> list[str]:
    """S-ops (and their selectors) that may read later positions, found by `check_graph`."""
    return list(graph.graph.get(nodes.CAUSAL_NOTES, ()))


def warn_causal_semantics(graph: nx.DiGraph, stacklevel: int = 2) -> None:
    """Raise one `CausalSemanticsWarning` naming every selector that may read later positions."""
    notes = causal_notes(graph)
    if notes:
        warnings.warn(
            CausalSemanticsWarning(
                "causal=True: these selectors may select keys after the query, so the model "
                "computes rasp.evaluate(program, xs, causal=True), which can differ from the "
                f"plain evaluation: {'; '.join(notes)}. Pass causal_strict=True to refuse such "
                "programs, or restrict the selectors with Select(indices, indices, LEQ) & ..."
            ),
            stacklevel=stacklevel + 1,
        )


def check_graph(
    graph: nx.DiGraph,
    fused: nx.DiGraph,
    causal: bool,
    bos: BasisDirection = bos_direction(),
    causal_strict: bool = False,
    passes: Iterable[str] = (),
) -> list[str]:
    """Problems of a traced graph with inferred values; `fused` is the same graph after
    elementwise fusion (`compiler.passes.fuse`), the graph that will be lowered.

    Each s-op is checked on `graph`, as the user wrote it. Block sizes are judged on `fused`
    after the optimisation `passes` `compile_rasp` will run (`compiler.passes.optimize`), which
    can shrink a block that is too large in the literal layout (e.g. a SequenceMap reading one
    s-op twice); numerical accuracy on `fused`.

    Leaves the measured numerical Map fits in `fused.graph[nodes.NUMERICAL_FITS]` for lowering (built
    with `bos` as the BOS direction), and in causal mode the selectors that may read later
    positions in `graph.graph[nodes.CAUSAL_NOTES]` (problems instead when `causal_strict`).
    """
    problems: list[str] = []
    notes: list[str] = []
    graph.graph[nodes.CAUSAL_NOTES] = notes
    if causal and graph.graph.get(nodes.USES_LENGTH):
        problems.append(
            "length: rasp.length is the length of the whole input, which a causal model cannot "
            "know at earlier positions; compile with causal=False, or use lib.make_length() "
            "(whose causal value is the length of the prefix)"
        )
    # Sizes first: the other checks may build tables of the same size.
    oversized = _oversized_blocks(fused)
    passes = tuple(passes)
    if oversized and passes:  # the passes cost time: run them only when they can matter
        oversized = _oversized_blocks(optimize_graph(fused, passes))
    inaccurate, fits = ({}, {}) if oversized else _inaccurate_numerical_maps(fused, bos)
    fused.graph[nodes.NUMERICAL_FITS] = fits
    for label in g.sop_nodes(graph):
        node = graph.nodes[label]
        kind = node[nodes.KIND]
        if label in oversized:
            problems.append(oversized[label])
            continue
        if label in inaccurate:
            problems.append(inaccurate[label])
        if g.has_none_flag(graph, label) and (kind.embedded or label in graph.graph[nodes.SINKS]):
            where = "an output" if label in graph.graph[nodes.SINKS] else "a constant"
            problems.append(
                f"{label}: {where} that is numerical and can be None; a numerical "
                f"{'output' if label in graph.graph[nodes.SINKS] else 'embedding'} holds a "
                "number only. Make it categorical, or map None to a number first (e.g. an "
                "Aggregate default of 0)"
            )
        if kind is g.NodeKind.MAP:
            problems += _check_map(graph, node[nodes.EXPR])
            problems += _check_fused_resolvable(fused, label)
        elif kind is g.NodeKind.AGGREGATE:
            problems += _check_selector(graph, node[nodes.EXPR], causal, causal_strict, notes)
            problems += _check_aggregate(graph, node[nodes.EXPR])
        elif kind is g.NodeKind.SELECTOR_WIDTH:
            problems += _check_selector(graph, node[nodes.EXPR], causal, causal_strict, notes)
    return problems


# Limits on one block, on what it actually stores and runs (large blocks are built sparse or
# factored, `craft.maps.SPARSE_ABOVE`, so their dense size does not matter):
# - non-zero weights it stores (compile-time memory, ~12 bytes each while built; model size);
MAX_BLOCK_NONZEROS = 20_000_000
# - hidden units of one MLP (every token carries that many activations in the forward pass);
MAX_HIDDEN_UNITS = 100_000
# - predicate calls of a selector without a structured fast path (one Python call per pair).
MAX_PREDICATE_CALLS = 20_000_000


def _width(graph: nx.DiGraph, label: str) -> int:
    """Dimensions of an s-op's residual subspace: its values (categorical) or 1 (numerical)."""
    if _encoding(graph, label) == "numerical":
        return 1
    return max(1, len(graph.nodes[label][nodes.VALUE_SET]))


def _inaccurate_numerical_maps(fused: nx.DiGraph, bos: BasisDirection) -> tuple[dict[str, str], dict]:
    """Numerical -> numerical Maps whose best MLP misses `NUMERICAL_MAP_TOLERANCE` (with the
    message), and every fit measured.

    Each is built and run in float32 on its whole input value set (`craft.chamber.numerical_fit`).
    """
    found, fits = {}, {}
    for label in g.sop_nodes(fused):
        operation = numerical_map_operation(fused, label)
        if operation is None:
            continue
        try:
            fit = fit_numerical_map(fused, label, 100.0, bos)
            flag_fit = fit_none_flag(fused, label, 100.0, bos)
        except (TypeError, ValueError):
            continue  # non-numeric values: reported by other checks
        except Exception:
            continue
        if fit is None:
            continue
        fits[label] = fit
        if flag_fit is not None and flag_fit.error > NUMERICAL_MAP_TOLERANCE:
            fit = flag_fit  # where f gives None is what the MLP cannot resolve
        elif fit.error <= NUMERICAL_MAP_TOLERANCE:
            continue
        inner = operation[1]
        count = len(fused.nodes[inner][nodes.VALUE_SET])
        if fit.construction == "unmeasured":
            found[label] = (
                f"{label}: numerical Map of {inner} is not affine on {inner}'s {count} values "
                f"(smallest gap {fit.smallest_gap:.3g}), too many to build and check an MLP "
                f"within {NUMERICAL_MAP_TOLERANCE:g} (about {measurable_values():,} at most). "
                f"Round the input first (e.g. numerical(Map(lambda x: round(x, 2), {inner}))), "
                "lower max_seq_len, or make the Map categorical"
            )
            continue
        found[label] = (
            f"{label}: numerical Map of {inner} is off by up to {fit.error:.2g} (relative) on "
            f"{inner}'s {count} values, whose smallest gap is {fit.smallest_gap:.3g}; a compiled "
            f"numerical Map must stay within {NUMERICAL_MAP_TOLERANCE:g}. Round the input first "
            f"(e.g. numerical(Map(lambda x: round(x, 2), {inner}))), lower max_seq_len, or make "
            "the Map categorical"
        )
    return found, fits


def _oversized_blocks(fused: nx.DiGraph) -> dict[str, str]:
    """Nodes whose block would store, run or evaluate too much, with the message.

    Sized on the graph as it will be lowered (after elementwise fusion and the optimisation
    passes): a Map fused into the SequenceMap below it builds one block over that SequenceMap's
    inputs, not two.
    """
    found = {}
    advice = (
        "shrink the value sets it reads or writes (fewer vocabulary tokens, a smaller "
        "max_seq_len, or a Map that buckets values)"
    )
    for label in g.sop_nodes(fused):
        cost = block_cost(fused, label)
        if cost.hidden > MAX_HIDDEN_UNITS:
            found[label] = (
                f"{label}: its MLP needs {cost.hidden:,} hidden units (one per input value "
                f"combination; limit {MAX_HIDDEN_UNITS:,}); {advice}"
            )
        elif cost.predicate_calls > MAX_PREDICATE_CALLS:
            found[label] = (
                f"{label}: its selector compares {cost.predicate_calls:,} query/key value pairs one "
                f"by one (limit {MAX_PREDICATE_CALLS:,}; EQ and order comparisons of numbers or "
                f"strings have no such limit); {advice}"
            )
        elif cost.nonzeros > MAX_BLOCK_NONZEROS:
            found[label] = (
                f"{label}: its block stores about {cost.nonzeros:,} non-zero weights (limit "
                f"{MAX_BLOCK_NONZEROS:,}); {advice}"
            )
    return found


@dataclasses.dataclass(frozen=True)
class BlockCost:
    """Upper bounds of what a node's block stores and runs."""

    nonzeros: int = 0
    hidden: int = 0  # hidden units of a categorical lookup table (one per input combination)
    predicate_calls: int = 0


def block_cost(graph: nx.DiGraph, label: str) -> BlockCost:
    """What the node's block will store (non-zeros), its MLP width and its predicate calls."""
    node = graph.nodes[label]
    expr, kind = node[nodes.EXPR], node[nodes.KIND]
    out = _width(graph, label)
    if kind in (g.NodeKind.MAP, g.NodeKind.SEQUENCE_MAP, g.NodeKind.LINEAR_SEQUENCE_MAP):
        inputs = g.node_inputs(graph, label)
        if len(set(inputs)) == 1:  # a Map, or f(x, x)
            (inner,) = set(inputs)
            if _encoding(graph, inner) == "categorical":
                width = _width(graph, inner)  # 2 x + bias per unit, one table entry per unit
                return BlockCost(nonzeros=3 * width, hidden=width)
            # At most two ramp units per value (often far fewer: numerical fits are measured
            # separately); the hidden-unit limit is for lookup tables.
            hidden = 2 * len(graph.nodes[inner][nodes.VALUE_SET]) + 1
            return BlockCost(nonzeros=3 * hidden + hidden * out)
        if kind is g.NodeKind.LINEAR_SEQUENCE_MAP and _encoding(graph, label) == "numerical":
            return BlockCost()
        pairs = math.prod(_width(graph, i) for i in inputs)  # 3 reads + 1 table entry per pair
        return BlockCost(nonzeros=4 * pairs, hidden=pairs)
    if kind in (g.NodeKind.AGGREGATE, g.NodeKind.SELECTOR_WIDTH):
        try:
            leaves = selectors.conjunction(expr.selector)
        except UnsupportedProgramError:
            return BlockCost()  # reported by _check_selector
        folds = node.get(nodes.FOLDED_MAPS) or {}  # Maps folded into this head read their inputs
        nonzeros = calls = 0
        for leaf in fold_maps.fold_leaves(leaves, folds) if folds else leaves:
            stored, evaluated = _selector_cost(graph, leaf)
            nonzeros, calls = nonzeros + stored, calls + evaluated
        if kind is g.NodeKind.AGGREGATE:
            value = folds[expr.sop.label].inner if expr.sop.label in folds else expr.sop.label
            nonzeros += _width(graph, value)  # W_OV: one entry per value direction
        return BlockCost(nonzeros=nonzeros, predicate_calls=calls)
    return BlockCost()


def _selector_cost(graph: nx.DiGraph, leaf: selectors.Leaf) -> tuple[int, int]:
    """`(stored non-zeros, predicate calls)` of one leaf's query/key matrix, as an upper bound.

    Order comparisons of numbers or strings are dyadic factors (`craft.maps.
    dyadic_prefix_factors`: at most log2(keys) + 1 entries per query and per key), EQ stores
    its matches (at most one per query for distinct values), anything else the whole table.
    """
    queries, keys = graph.nodes[leaf.queries][nodes.VALUE_SET], graph.nodes[leaf.keys][nodes.VALUE_SET]
    q, k = _width(graph, leaf.queries), _width(graph, leaf.keys)
    name = leaf.predicate.name if isinstance(leaf.predicate, enum.Enum) else None
    sortable = _homogeneous(queries) and _homogeneous(keys)
    if name in ("LT", "LEQ", "GT", "GEQ") and sortable:
        return (q + k) * (k.bit_length() + 1), 0
    if name == "EQ":  # matches found by hashing: one key per query value at most
        return q + k, 0
    if name in ("TRUE", "FALSE"):
        return q + k, 0
    return q * k, q * k


def _homogeneous(values: frozenset) -> bool:
    """All real numbers (not bool-mixed strings), or all strings: comparable by numpy."""
    return all(isinstance(v, (int, float)) for v in values) or all(isinstance(v, str) for v in values)


def _encoding(graph: nx.DiGraph, label: str) -> str:
    return "numerical" if rasp.is_numerical(graph.nodes[label][nodes.EXPR]) else "categorical"


def _nullable(graph: nx.DiGraph, label: str) -> bool:
    return bool(graph.nodes[label][nodes.NULLABLE])


def _check_map(graph: nx.DiGraph, expr: rasp.Map) -> list[str]:
    # A numerical Map that can be None carries a none flag (`craft.chamber.definedness`): an
    # input None silences its MLP and sets the flag; where the function returns None, a lookup
    # table (categorical input) or a measured flag MLP (numerical input,
    # `compiler.passes.numerical_maps.fit_none_flag`) sets it.
    problems = []
    numerical_in = _encoding(graph, expr.inner.label) == "numerical"
    if numerical_in and not rasp.is_numerical(expr):
        # (numerical -> numerical Maps are measured instead: _inaccurate_numerical_maps)
        problems += _check_resolvable(graph, expr.label, expr.f, expr.inner.label)
    return problems


def _check_fused_resolvable(fused: nx.DiGraph, label: str) -> list[str]:
    """`_check_resolvable` on the MLP lowering builds: a Map fused onto a numerical -> numerical
    Map reads that Map's input, whose values may be closer than the intermediate's (e.g. two
    floats that one number rounded to, which `x // 2` then sends to different results)."""
    node = fused.nodes.get(label)
    if node is None or not node.get(nodes.FUSED) or node[nodes.KIND] is not g.NodeKind.MAP:
        return []
    fn, (inner,) = g.operation(fused, label)
    if _encoding(fused, inner) != "numerical" or rasp.is_numerical(node[nodes.EXPR]):
        return []
    return _check_resolvable(fused, label, fn, inner)


def _check_resolvable(graph: nx.DiGraph, label: str, f: Any, inner: str) -> list[str]:
    """A Map of a numerical s-op is a discretising MLP: its input values must be separable.

    Neighbouring input values closer than float32 resolves (typically one real number that
    float64 rounding turned into two floats, e.g. a mean of means) cannot get different outputs.
    """
    if not graph.nodes[inner][nodes.VALUE_SET]:
        return []  # nothing to discretise
    numerical_out = rasp.is_numerical(graph.nodes[label][nodes.EXPR])
    outputs = None if numerical_out else sorted(graph.nodes[label][nodes.VALUE_SET], key=repr)
    try:
        pair = numerical_mlp.unresolvable_inputs(f, graph.nodes[inner][nodes.VALUE_SET], outputs)
    except (TypeError, ValueError):
        return []  # non-numeric values or a non-number result: reported by other checks
    if pair is None:
        return []
    low, high = pair
    return [
        f"{label}: reads the numerical s-op {inner}, whose values {low!r} and {high!r} are only "
        f"{high - low:.3g} apart (one number up to float rounding, or closer than a float32 "
        "model resolves) but must give different results; round the values first, e.g. "
        f"numerical(Map(lambda x: round(x, 4), {inner}))"
    ]


def _check_selector(
    graph: nx.DiGraph, expr: rasp.Aggregate | rasp.SelectorWidth, causal: bool, strict: bool, notes: list[str]
) -> list[str]:
    selector = expr.selector
    try:
        leaves = selectors.conjunction(selector)
    except UnsupportedProgramError as error:
        return [f"{expr.label}: {problem}" for problem in error.problems]
    problems = []
    for leaf in leaves:
        if joint_selectors.is_joint(leaf.predicate):
            problems += _check_joint(graph, expr, leaf)
        for role, label in (("keys", leaf.keys), ("queries", leaf.queries)):
            if _encoding(graph, label) == "numerical":
                problems.append(
                    f"{expr.label}: its selector's {role} s-op {label} is numerical (a "
                    "ConstantSelector over numerical indices); attention compares categorical "
                    "values: keep indices categorical"
                )
    if causal and not problems:
        try:
            later = selectors.reads_later_positions(graph, expr.label, leaves)
        except UnsupportedProgramError as error:
            return list(error.problems)
        if later and strict:
            problems.append(
                f"{expr.label}: in causal mode its selector may select keys after the query, so "
                "the causal model computes the causal evaluation, not the plain one "
                "(causal_strict=True); compile with causal=False, drop causal_strict, or "
                "restrict the selector with Select(indices, indices, LEQ) & ... so it reads "
                "only earlier positions"
            )
        elif later:
            notes.append(f"{expr.selector.label} (read by {expr.label})")
    return problems


def _check_joint(graph: nx.DiGraph, expr: rasp.Aggregate | rasp.SelectorWidth, leaf: selectors.Leaf) -> list[str]:
    """A joint key/query lookup (`compiler.passes.joint_selectors`) is exact only over packed
    s-ops that are never None: a None part would make the whole packed value None."""
    problems = []
    for label in dict.fromkeys((leaf.keys, leaf.queries)):
        if _nullable(graph, label) and joint_selectors.is_pack(graph.nodes[label][nodes.EXPR]):
            problems.append(
                f"{expr.label}: its selector (an `or`, or a `not` of an `and`, over selectors "
                f"reading different s-ops) compiles to one head over the packed s-op {label}, "
                "which is None where one of the packed s-ops is None, hiding the other operand; "
                "map None to a value in those s-ops first (e.g. an Aggregate default)"
            )
    return problems


# Largest |default| a numerical head writes through BOS: a query that selects something still
# gives BOS weight <= max_seq_len * e^-50 (~2e-20), negligible next to float32 rounding below it.
MAX_BOS_DEFAULT = 1e9


def _bos_default_is_exact(default: Any) -> bool:
    if isinstance(default, bool) or not isinstance(default, (int, float)):
        return False
    return math.isfinite(default) and abs(default) <= MAX_BOS_DEFAULT


def _check_aggregate(graph: nx.DiGraph, expr: rasp.Aggregate) -> list[str]:
    problems = []
    sop = expr.sop.label
    try:
        always = selectors.always_selects(graph, expr.label, selectors.conjunction(expr.selector))
    except UnsupportedProgramError:
        always = False  # the selector problem itself is reported by _check_selector
    # A categorical Aggregate needs no check here: a numerical s-op aggregated categorically was
    # given a one-hot copy by compiler.passes.discretise, and a non-None default is written by the head
    # (BOS carries it, lower.needs_bos_default).
    if rasp.is_numerical(expr):
        values = graph.nodes[sop][nodes.VALUE_SET]
        if _encoding(graph, sop) == "categorical" and not all(
            isinstance(v, (bool, int, float)) for v in values
        ):
            problems.append(
                f"{expr.label}: numerical Aggregate of {sop}, whose values are not all numbers; "
                "aggregate a numerical s-op"
            )
        # Selecting a None is an evaluation error, so a None-able s-op needs no check; default
        # None sets the none flag through BOS. A non-zero default is written by the head (BOS
        # carries it), exactly when it is a number small enough that BOS's leftover weight
        # e^-50 on it stays below float32.
        if expr.default is None:
            pass
        elif expr.default != 0 and not always and not _bos_default_is_exact(expr.default):
            problems.append(
                f"{expr.label}: numerical Aggregate with default={expr.default!r}; a compiled "
                f"head writes the default through BOS only for a finite number of magnitude at "
                f"most {MAX_BOS_DEFAULT:g}, so use such a number (or default=0)"
            )
    return problems
