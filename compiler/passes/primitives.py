"""Express Tracr's `rasp.length` primitive with operations the compiler lowers.

`length` (a `LengthType` s-op) is the input's length at every position. A non-causal model
computes it as the width of an all-true selector, `SelectorWidth(Select(tokens, tokens, TRUE))`,
which the evaluator agrees with on every input; this pass substitutes that expression (keeping
the length s-op's name and encoding) before tracing. A causal model cannot see the whole input at
earlier positions, so validation refuses `length` with causal=True (`USES_LENGTH`).
"""

from __future__ import annotations

from compiler.passes.discretise import rebuild, walk
from compiler.passes.outputs import Root, as_root
from rasp import rasp


def expand_length(program: Root) -> tuple[Root, bool]:
    """`program` with every `LengthType` replaced, and whether there was one."""
    if not isinstance(program, rasp.RASPExpr):
        return program, False
    order = walk(program)
    if not any(isinstance(expr, rasp.LengthType) for expr in order):
        return program, False
    replaced: dict[int, rasp.RASPExpr] = {}

    def current(expr: rasp.RASPExpr) -> rasp.RASPExpr:
        return replaced.get(id(expr), expr)

    for expr in order:
        if isinstance(expr, rasp.LengthType):
            everything = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE)
            width = rasp.SelectorWidth(everything.named(f"{expr.label}_selector"))
            replaced[id(expr)] = rasp.annotate(width, **dict(expr.annotations))
        elif any(id(child) in replaced for child in expr.children):
            replaced[id(expr)] = rebuild(expr, current)
    return as_root(current(program)), True
