"""Several programs compiled side by side: the expression that ties their outputs together.

`compile_rasp([main, other, ...], ...)` compiles every program into one model: one residual
stream, shared inputs and shared sub-expressions, one output per program. The program-level
passes (length expansion, discretisation, common-subexpression merging, relabelling) rewrite
expressions children-first from one root, so that an expression two programs share is rewritten
once; `Outputs` is that root. It is not a RASP operation: `compiler.passes.graph.trace` records its
children as the graph's outputs (`nodes.SINKS`, the first also as `nodes.SINK`) and adds no node
for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias, cast

from rasp import rasp


class Outputs(rasp.RASPExpr):
    """The programs of a multi-output compile, in order (the first is the main output)."""

    default_label_stem = "outputs"

    _programs: tuple[rasp.SOp, ...]

    def __init__(self, programs: Sequence[rasp.SOp]) -> None:
        super().__init__()
        self._set("_programs", tuple(programs))

    @property
    def children(self) -> tuple[rasp.RASPExpr, ...]:
        return self._programs


# What the program-level passes rewrite: one program, or several tied together by `Outputs`.
Root: TypeAlias = rasp.SOp | Outputs


def as_root(expr: object) -> Root:
    """`expr`, the rewrite of a root, typed as the root it is.

    The program-level passes rewrite expressions children-first and keep each one's kind (an
    s-op becomes an s-op, an `Outputs` an `Outputs`: `compiler.passes.discretise.rebuild`), so a
    root's rewrite is a root. Not checked here: a program that is no root passes through the
    passes unchanged and `compiler.passes.graph.trace` reports it.
    """
    return cast(Root, expr)


def programs_of(root: rasp.RASPExpr) -> tuple[rasp.RASPExpr, ...]:
    """The output expressions of a root: an `Outputs`' children, or the root itself."""
    return root.children if isinstance(root, Outputs) else (root,)
