"""Give operations that need one-hot inputs categorical copies of their numerical inputs.

Three constructions read one-hot values only: a two-input MLP (a lookup table over value pairs),
an attention head's query and key (a predicate table over value pairs), and a categorical
Aggregate (which copies a one-hot). Every numerical s-op has a finite value set, so a
discretising MLP (`categorical(Map(lambda x: x, sop))`, exact on that set) turns it into a one-hot
first; this pass inserts that copy, labelled `<sop>_categorical`, for each numerical input of a
`SequenceMap` (and of a `LinearSequenceMap`, unless both inputs and the output are numerical:
that one is an exact linear MLP), each numerical keys / queries s-op of a `Select`, and the
numerical s-op of a categorical `Aggregate`. It costs one MLP sub-layer, and none when the
numerical input is itself a Map read only there (the copy then fuses into it). This is what
validation used to ask users to write.

The rewrite is done on RASP expressions, before tracing, so value inference, validation, lowering
and the evaluator all see the same program. Expressions are rebuilt only above a rewritten
SequenceMap; everything else keeps its identity and label.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from compiler.passes.outputs import Outputs, Root, as_root
from rasp import rasp

CATEGORICAL_SUFFIX = "_categorical"


def copy_value(x: object) -> object:
    """The function of the compiler's categorical copies (this pass's discretising copies and
    `compiler.passes.readout`'s read-outs): the identity, named so it prints readably and so
    `compiler.passes.rounding` can recognise the copies."""
    return x


def _numerical_inputs(expr: rasp.RASPExpr) -> tuple[rasp.SOp, ...]:
    """The children of `expr` that must be read as one-hots but are numerical."""
    if isinstance(expr, rasp.LinearSequenceMap):
        pair = (expr.fst, expr.snd)
        if all(rasp.is_numerical(c) for c in pair) and rasp.is_numerical(expr):
            return ()  # the exact linear MLP reads numerical inputs directly
        return tuple(c for c in pair if rasp.is_numerical(c))
    if isinstance(expr, rasp.SequenceMap):
        return tuple(c for c in (expr.fst, expr.snd) if rasp.is_numerical(c))
    if isinstance(expr, rasp.Select):
        return tuple(c for c in (expr.keys, expr.queries) if rasp.is_numerical(c))
    if isinstance(expr, rasp.Aggregate) and rasp.is_categorical(expr) and rasp.is_numerical(expr.sop):
        return (expr.sop,)
    return ()


def walk(program: rasp.RASPExpr) -> list[rasp.RASPExpr]:
    """Every expression of `program` once, children before parents."""
    order, seen, stack = [], set(), [(program, False)]
    while stack:
        expr, expanded = stack.pop()
        if expanded:
            order.append(expr)
            continue
        if id(expr) in seen:
            continue
        seen.add(id(expr))
        stack.append((expr, True))
        stack.extend((child, False) for child in expr.children if id(child) not in seen)
    return order


def as_sop(expr: rasp.RASPExpr) -> rasp.SOp:
    """`expr` typed as the s-op it is known to be: the rewrite of an s-op (the passes' rewrites,
    `rebuild` and each pass's replacements, keep every expression's kind), or an output of a
    traced program (`compiler.passes.graph.trace` checks that they are s-ops)."""
    return cast(rasp.SOp, expr)


def as_selector(expr: rasp.RASPExpr) -> rasp.Selector:
    """`expr`, the rewrite of a selector, typed as the selector it is (as `as_sop`)."""
    return cast(rasp.Selector, expr)


def rebuild(expr: rasp.RASPExpr, child: Callable[[rasp.RASPExpr], rasp.RASPExpr]) -> rasp.RASPExpr:
    """`expr` with each child replaced by `child(c)`, same label and annotations.

    `child` keeps each child's kind: it gives an s-op for an s-op, a selector for a selector.
    """

    def sop(c: rasp.RASPExpr) -> rasp.SOp:
        return as_sop(child(c))

    def selector(c: rasp.RASPExpr) -> rasp.Selector:
        return as_selector(child(c))

    new: rasp.RASPExpr
    if isinstance(expr, rasp.LinearSequenceMap):
        new = rasp.LinearSequenceMap(sop(expr.fst), sop(expr.snd), expr.fst_fac, expr.snd_fac)
    elif isinstance(expr, rasp.SequenceMap):
        new = rasp.SequenceMap(expr.f, sop(expr.fst), sop(expr.snd))
    elif isinstance(expr, rasp.Map):
        new = rasp.Map(expr.f, sop(expr.inner), simplify=False)
    elif isinstance(expr, rasp.Aggregate):
        new = rasp.Aggregate(selector(expr.selector), sop(expr.sop), default=expr.default)
    elif isinstance(expr, rasp.SumAggregate):
        new = rasp.SumAggregate(selector(expr.selector), sop(expr.sop), default=expr.default)
    elif isinstance(expr, rasp.SelectorWidth):
        new = rasp.SelectorWidth(selector(expr.selector))
    elif isinstance(expr, rasp.Select):
        new = rasp.Select(sop(expr.keys), sop(expr.queries), expr.predicate)
    elif isinstance(expr, rasp.SelectorAnd):
        new = rasp.SelectorAnd(selector(expr.fst), selector(expr.snd))
    elif isinstance(expr, rasp.SelectorOr):
        new = rasp.SelectorOr(selector(expr.fst), selector(expr.snd))
    elif isinstance(expr, rasp.SelectorNot):
        new = rasp.SelectorNot(selector(expr.inner))
    elif isinstance(expr, Outputs):
        new = Outputs(tuple(sop(c) for c in expr.children))
    else:  # leaves and unknown types stay as they are (validation reports the latter)
        return expr
    return rasp.annotate(new, **dict(expr.annotations))


def discretise_numerical_inputs(program: Root) -> Root:
    """`program` with categorical copies where a numerical s-op must be read as a one-hot.

    Returns `program` itself when nothing needs rewriting.
    """
    if not isinstance(program, rasp.RASPExpr):
        return program
    order = walk(program)
    if not any(_numerical_inputs(expr) for expr in order):
        return program
    labels = {expr.label for expr in order}
    replaced: dict[int, rasp.RASPExpr] = {}
    copies: dict[int, rasp.SOp] = {}

    def current(expr: rasp.RASPExpr) -> rasp.RASPExpr:
        return replaced.get(id(expr), expr)

    def categorical_copy(sop: rasp.SOp) -> rasp.SOp:
        if id(sop) not in copies:
            label = sop.label + CATEGORICAL_SUFFIX
            while label in labels:
                label += "_"
            labels.add(label)
            copy = rasp.Map(copy_value, as_sop(current(sop)), simplify=False)
            copies[id(sop)] = rasp.categorical(copy).named(label)
        return copies[id(sop)]

    for expr in order:
        numerical = {id(c): c for c in _numerical_inputs(expr)}
        if numerical:
            def child(c: rasp.RASPExpr, numerical: dict[int, rasp.SOp] = numerical) -> rasp.RASPExpr:
                return categorical_copy(numerical[id(c)]) if id(c) in numerical else current(c)

            replaced[id(expr)] = rebuild(expr, child)
        elif any(id(c) in replaced for c in expr.children):
            replaced[id(expr)] = rebuild(expr, current)
    return as_root(current(program))
