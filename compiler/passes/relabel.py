"""Give every expression of a program its own label, keeping the user's names where possible.

Programs built from helper functions routinely create two different expressions with the same
name (each call of a helper names its result the same). The compiler keys graph nodes and
residual directions by label, so before tracing, every expression whose label is already taken
by a different expression gets a relabelled copy: the user's name plus the shortest free suffix
`_2`, `_3`, ... The primitives `tokens` / `indices` and the program's output keep their names;
the others are numbered in a deterministic walk order. Expressions above a relabelled one are
rebuilt (same function, annotations and name), everything else keeps its identity.
"""

from __future__ import annotations

from compiler.passes.discretise import rebuild, walk
from compiler.passes.outputs import Root, as_root, programs_of
from rasp import rasp


def _priority(program: rasp.RASPExpr, order: list[rasp.RASPExpr]) -> list[rasp.RASPExpr]:
    """Who keeps a contested name: the primitives, then the outputs in order, then walk order."""
    primitives = [e for e in order if e is rasp.tokens or e is rasp.indices]
    outputs = [e for e in programs_of(program) if not any(e is p for p in primitives)]
    first = primitives + outputs
    rest = [e for e in order if not any(e is p for p in first)]
    return first + rest


def unique_labels(program: Root) -> tuple[Root, dict[str, str]]:
    """`program` with distinct labels, and {new label: the user's label} for every renamed one.

    Returns `program` itself (and an empty dict) when its labels are already distinct.
    """
    if not isinstance(program, rasp.RASPExpr):
        return program, {}
    order = walk(program)
    owners: dict[str, int] = {}
    clashes = False
    for expr in _priority(program, order):
        owner = owners.setdefault(expr.label, id(expr))
        clashes = clashes or owner != id(expr)
    if not clashes:
        return program, {}
    taken = set(owners)
    renamed: dict[int, str] = {}
    for expr in _priority(program, order):
        if owners[expr.label] == id(expr):
            continue
        number = 2
        while f"{expr.label}_{number}" in taken:
            number += 1
        renamed[id(expr)] = f"{expr.label}_{number}"
        taken.add(renamed[id(expr)])

    replaced: dict[int, rasp.RASPExpr] = {}

    def current(expr: rasp.RASPExpr) -> rasp.RASPExpr:
        return replaced.get(id(expr), expr)

    for expr in order:  # children before parents
        new = expr
        if any(id(child) in replaced for child in expr.children):
            new = rebuild(expr, current)
        if id(expr) in renamed:
            new = rasp.annotate(new, name=renamed[id(expr)])
        if new is not expr:
            replaced[id(expr)] = new
    names = {renamed[id(expr)]: expr.label for expr in order if id(expr) in renamed}
    return as_root(current(program)), names
