"""Compile `or` (and `not` of `and`) over selectors of different s-ops through a joint lookup.

One attention head implements a conjunction of leaf predicates (`compiler.passes.selectors`).
A disjunction of leaves over *different* key / query s-ops is no conjunction; but it is one leaf
over product s-ops: pack every key s-op the selector reads into one tuple-valued s-op (an MLP
lookup per extra s-op, `SequenceMap`), likewise the queries, and select with `JointPredicate`,
which evaluates the whole selector tree on the packed values. This rewrite runs on the RASP
program before `compiler.passes.discretise` (which gives numerical pack inputs one-hot copies)
and costs one MLP sub-layer per packing step before the head.

A `Select` never selects a pair with a `None` side, but a packed tuple is `None` as soon as one
of its parts is, which would hide the other operand of an `or`. So a part that can be `None`
(known after value inference: `fill_absent`, run by `compiler.passes.readout.trace_values`) is
first replaced by `defined_or_absent(part)`: a categorical Aggregate that copies the part
at each position where it is defined and gives the value `ABSENT` elsewhere, through the
selector `Select(part, indices, TRUE) & Select(indices, indices, EQ)` (a key whose part is
None is never selected, so the query gets the default). `JointPredicate` treats `ABSENT` like
`None`. This costs one attention sub-layer and one head per such part, is exact like any
categorical head with a default, and reads only the query's own position (causal too).
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import networkx as nx

from compiler.errors import UnsupportedProgramError
from compiler.passes import nodes, selectors
from compiler.passes.discretise import as_sop, rebuild, walk
from compiler.passes.outputs import Root, as_root
from rasp import rasp

KEYS_SUFFIX = "_joint_keys"
QUERIES_SUFFIX = "_joint_queries"


@dataclasses.dataclass(frozen=True)
class Absent:
    """The value of `defined_or_absent(x)` where `x` is None (unequal to every user value)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = Absent()
ABSENT_SUFFIX = "_or_absent"


@dataclasses.dataclass(frozen=True)
class Pair:
    """`(x, y)`: the first step of packing s-ops into one tuple-valued s-op."""

    def __call__(self, x: Any, y: Any) -> tuple:
        return (x, y)


@dataclasses.dataclass(frozen=True)
class Append:
    """`packed + (x,)`: every further packing step."""

    def __call__(self, packed: tuple, x: Any) -> tuple:
        return (*packed, x)


@dataclasses.dataclass(frozen=True)
class JointPredicate:
    """A selector tree evaluated on packed keys and queries (`tree`: nested tuples
    `("select", key slot, query slot, predicate)`, `("not", t)`, `("and", a, b)`, `("or", a, b)`;
    a slot indexes the packed tuple, or is None when only one s-op was packed)."""

    tree: tuple

    def __call__(self, key: Any, query: Any) -> bool:
        return _holds(self.tree, key, query)


def _slot(value: Any, slot: int | None) -> Any:
    return value if slot is None else value[slot]


def _holds(tree: tuple, key: Any, query: Any) -> bool:
    op = tree[0]
    if op == "select":
        k, q = _slot(key, tree[1]), _slot(query, tree[2])
        return k is not None and q is not None and not isinstance(k, Absent) and not isinstance(q, Absent) and bool(tree[3](k, q))
    if op == "not":
        return not _holds(tree[1], key, query)
    if op == "and":
        return _holds(tree[1], key, query) and _holds(tree[2], key, query)
    return _holds(tree[1], key, query) or _holds(tree[2], key, query)


def _leaves(selector: rasp.Selector) -> list[rasp.Selector]:
    if isinstance(selector, (rasp.Select, rasp.ConstantSelector)):
        return [selector]
    # The operands of a selector combination (and, or, not) are selectors.
    return [leaf for child in selector.children for leaf in _leaves(cast(rasp.Selector, child))]


def _pack(sops: list[rasp.SOp], label: str) -> rasp.SOp:
    packed = rasp.SequenceMap(Pair(), sops[0], sops[1])
    for sop in sops[2:]:
        packed = rasp.SequenceMap(Append(), packed, sop)
    return rasp.categorical(packed).named(label)


def _tree(selector: rasp.Selector, keys: list, queries: list, single_k: bool, single_q: bool) -> tuple:
    def slot(sops: list, sop: rasp.SOp, single: bool) -> int | None:
        return None if single else next(i for i, s in enumerate(sops) if s is sop)

    if isinstance(selector, rasp.Select):
        return ("select", slot(keys, selector.keys, single_k), slot(queries, selector.queries, single_q), selector.predicate)
    if isinstance(selector, rasp.ConstantSelector):
        pattern = selectors.ConstantPattern(tuple(tuple(bool(x) for x in row) for row in selector.value))
        return ("select", slot(keys, rasp.indices, single_k), slot(queries, rasp.indices, single_q), pattern)
    if isinstance(selector, rasp.SelectorNot):
        return ("not", _tree(selector.inner, keys, queries, single_k, single_q))
    op = "and" if isinstance(selector, rasp.SelectorAnd) else "or"
    selector = cast("rasp.SelectorAnd | rasp.SelectorOr", selector)  # the only combinations left
    return (op, _tree(selector.fst, keys, queries, single_k, single_q), _tree(selector.snd, keys, queries, single_k, single_q))


def _joint(selector: rasp.Selector) -> rasp.Select:
    keys: list[rasp.SOp] = []
    queries: list[rasp.SOp] = []
    for leaf in _leaves(selector):
        k, q = (leaf.keys, leaf.queries) if isinstance(leaf, rasp.Select) else (rasp.indices, rasp.indices)
        if not any(k is s for s in keys):
            keys.append(k)
        if not any(q is s for s in queries):
            queries.append(q)
    single_k, single_q = len(keys) == 1, len(queries) == 1
    packed_keys = keys[0] if single_k else _pack(keys, selector.label + KEYS_SUFFIX)
    packed_queries = queries[0] if single_q else _pack(queries, selector.label + QUERIES_SUFFIX)
    predicate = JointPredicate(_tree(selector, keys, queries, single_k, single_q))
    return rasp.Select(packed_keys, packed_queries, predicate).named(selector.label)


def _needs_joint(selector: rasp.Selector) -> bool:
    try:
        selectors.conjunction(selector)
    except UnsupportedProgramError:
        return True
    return False


def join_selectors(program: Root) -> Root:
    """`program` with every selector that is no conjunction of leaves replaced by one joint
    `Select` (module docstring); `program` itself when there is none."""
    if not isinstance(program, rasp.RASPExpr):
        return program
    order = walk(program)
    if not any(isinstance(e, rasp.Selector) and not isinstance(e, rasp.Select) and _needs_joint(e) for e in order):
        return program
    replaced: dict[int, rasp.RASPExpr] = {}

    def current(expr: rasp.RASPExpr) -> rasp.RASPExpr:
        return replaced.get(id(expr), expr)

    for expr in order:
        if any(id(child) in replaced for child in expr.children):
            replaced[id(expr)] = rebuild(expr, current)
        now = current(expr)
        if isinstance(now, rasp.Selector) and not isinstance(now, rasp.Select) and _needs_joint(now):
            replaced[id(expr)] = _joint(now)
    return as_root(current(program))


def defined_or_absent(sop: rasp.SOp) -> rasp.SOp:
    """`sop` where it is not None, `ABSENT` where it is (module docstring): never None."""
    defined = rasp.Select(sop, rasp.indices, rasp.Comparison.TRUE).named(sop.label + "_defined")
    itself = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.EQ).named(sop.label + "_itself")
    copy = rasp.Aggregate(defined & itself, sop, default=ABSENT)
    return rasp.categorical(copy).named(sop.label + ABSENT_SUFFIX)


def fill_absent(program: Root, graph: nx.DiGraph) -> Root:
    """`program` whose packing steps read `defined_or_absent(part)` instead of each part that
    can be None (and a joint lookup with a `not`, its unpacked side that can be None: `_negates`);
    `program` itself when there is none. `graph` is its traced graph with values."""
    if not isinstance(program, rasp.RASPExpr):
        return program
    order = walk(program)
    nullable = {
        id(part)
        for expr in order
        if is_pack(expr) or (isinstance(expr, rasp.Select) and _negates(expr.predicate))
        for part in expr.children
        if not is_pack(part) and graph.nodes[part.label][nodes.NULLABLE]
    }
    if not nullable:
        return program
    replaced: dict[int, rasp.RASPExpr] = {}
    filled: dict[int, rasp.SOp] = {}

    def current(expr: rasp.RASPExpr) -> rasp.RASPExpr:
        return replaced.get(id(expr), expr)

    def part(expr: rasp.RASPExpr) -> rasp.RASPExpr:
        if id(expr) not in nullable:
            return current(expr)
        if id(expr) not in filled:
            filled[id(expr)] = defined_or_absent(as_sop(current(expr)))  # read by a pack or a Select: an s-op
        return filled[id(expr)]

    for expr in order:
        if is_pack(expr) or (isinstance(expr, rasp.Select) and _negates(expr.predicate)):
            replaced[id(expr)] = rebuild(expr, part)
        elif any(id(child) in replaced for child in expr.children):
            replaced[id(expr)] = rebuild(expr, current)
    return as_root(current(program))


def _negates(predicate: Any) -> bool:
    """Whether a joint lookup's tree has a `not`: only then can it hold where a side that was
    not packed (the single key or query s-op) is None, which a `Select` would never select, so
    that side is read as `defined_or_absent` too."""
    def has_not(tree: tuple) -> bool:
        return tree[0] == "not" or (tree[0] != "select" and any(has_not(t) for t in tree[1:]))

    return isinstance(predicate, JointPredicate) and has_not(predicate.tree)


def is_pack(expr: rasp.RASPExpr) -> bool:
    """Whether `expr` is a packing step of a joint lookup."""
    return isinstance(expr, rasp.SequenceMap) and isinstance(expr.f, (Pair, Append))


def is_joint(predicate: Any) -> bool:
    """Whether a leaf's predicate is a joint lookup's (possibly wrapped by
    `selectors.CheckedPredicate`, which reports a predicate's failures)."""
    inner = predicate.predicate if isinstance(predicate, selectors.CheckedPredicate) else predicate
    return isinstance(inner, JointPredicate)
