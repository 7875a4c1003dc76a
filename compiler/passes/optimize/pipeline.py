"""Which optimisation passes run, in what order, and what they recorded.

`PASSES` names every pass in pipeline order; `selected_passes` turns `compile_rasp`'s `optimize`
argument into the names to run; `optimize_program` runs the program-level pass (`merge_common`)
before tracing and `optimize_graph` the graph passes after fusion; `record` and `applied` keep
and read the one-line descriptions of what was changed (`graph.graph[nodes.APPLIED]`).
"""


from __future__ import annotations

from collections.abc import Callable, Iterable

import networkx as nx

from compiler.errors import InvalidInputError
from compiler.passes import nodes
from compiler.passes.optimize.fold_maps import fold_maps_into_attention
from compiler.passes.optimize.fold_outputs import fold_outputs_into_heads
from compiler.passes.optimize.fuse_inputs import fuse_map_inputs
from compiler.passes.optimize.merge_common import merge_common
from compiler.passes.optimize.prune_tables import prune_tables
from compiler.passes.optimize.prune_values import prune_values
from compiler.passes.outputs import Root

Pass = Callable[[nx.DiGraph], nx.DiGraph]
ProgramPass = Callable[[Root], tuple[Root, tuple[str, ...]]]

# Applied to the RASP program before tracing: (program -> program, lines describing changes).
PROGRAM_PASSES: dict[str, ProgramPass] = {"merge_common": merge_common}

GRAPH_PASSES: dict[str, Pass] = {
    "fold_maps": fold_maps_into_attention,
    "fold_outputs": fold_outputs_into_heads,
    "fuse_inputs": fuse_map_inputs,
    "prune_tables": prune_tables,
    "prune_values": prune_values,
}

# Applied when lowering (`compiler.passes.lower.LoweringOptions.narrow_lookups`).
NARROW_LOOKUPS = "narrow_lookups"
# Applied when assembling the weights rather than on the graph.
FACTOR_QK = "factor_qk"

PASSES: tuple[str, ...] = (*PROGRAM_PASSES, *GRAPH_PASSES, NARROW_LOOKUPS, FACTOR_QK)


def selected_passes(optimize: bool | Iterable[str]) -> tuple[str, ...]:
    """The pass names `optimize` selects, in pipeline order; raises on an unknown name."""
    if optimize is True:
        return tuple(PASSES)
    if optimize is False or optimize is None:
        return ()
    if isinstance(optimize, str):
        raise InvalidInputError(
            f"optimize must be True, False or a collection of pass names, got the string "
            f"{optimize!r}; pass e.g. optimize=[{optimize!r}]"
        )
    try:
        names = set(optimize)
    except TypeError as error:
        raise InvalidInputError(
            f"optimize must be True, False or a collection of pass names, got {optimize!r}"
        ) from error
    unknown = sorted(map(str, names - set(PASSES)))
    if unknown:
        raise InvalidInputError(
            f"optimize: unknown pass(es) {', '.join(unknown)}; the passes are {', '.join(PASSES)}"
        )
    return tuple(name for name in PASSES if name in names)


def optimize_program(program: Root, passes: Iterable[str]) -> tuple[Root, tuple[str, ...]]:
    """Run the named program passes; returns the rewritten program and what each one changed
    (record the lines on the traced graph with `record`)."""
    lines: tuple[str, ...] = ()
    for name in passes:
        if name in PROGRAM_PASSES:
            program, changes = PROGRAM_PASSES[name](program)
            lines += changes
    return program, lines


def record(graph: nx.DiGraph, lines: Iterable[str]) -> None:
    """Append applied-optimisation lines to a graph's record (shown by the model summary)."""
    graph.graph[nodes.APPLIED] = tuple(graph.graph.get(nodes.APPLIED, ())) + tuple(lines)


def optimize_graph(graph: nx.DiGraph, passes: Iterable[str]) -> nx.DiGraph:
    """Run the named passes in order; returns the final graph (the input is not changed)."""
    for name in passes:
        if name in GRAPH_PASSES:
            graph = GRAPH_PASSES[name](graph)
    return graph


def applied(graph: nx.DiGraph) -> tuple[str, ...]:
    """The optimisations recorded on a graph, one line each."""
    return tuple(graph.graph.get(nodes.APPLIED, ()))


__all__ = [
    "FACTOR_QK",
    "NARROW_LOOKUPS",
    "GRAPH_PASSES",
    "PASSES",
    "PROGRAM_PASSES",
    "applied",
    "optimize_graph",
    "optimize_program",
    "record",
    "selected_passes",
]
