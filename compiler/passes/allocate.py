"""Assign every lowered block to a sub-layer of the transformer.

Sub-layers alternate: even indices are attention, odd indices are MLPs (sub-layer `2l` and
`2l + 1` form layer `l`). The default allocator schedules each operation as early as its inputs
allow (longest path from the embeddings), which packs independent operations into the same
sub-layer.

That schedule is optimal: it uses the fewest layers of any valid schedule of the graph it is
given. Proof, by induction in topological order: let `s` be any valid schedule and `asap` this
one. A node's `asap` index is the *smallest* index of its kind's parity (for a selector width:
of its attention block) above every input's `asap` index. In `s` the node sits at an index of
the same parity above every input's `s` index, which by induction is at least that input's
`asap` index; so `s(v) >= asap(v)` for every node, and `s` needs at least as many sub-layers.
Widths do not enter (a sub-layer holds any number of heads or MLP units), so minimising the
depth of each node minimises the layer count. `milp_schedule` checks this with an exact integer
program (scipy's HiGHS) minimising the layer count directly; the tests compare both on every
library program and on fuzz programs. Fewer layers than this need a different graph (the
optimisation passes in `compiler.passes.optimize` fold Maps into attention heads).
"""

from __future__ import annotations

from collections.abc import Callable

import networkx as nx
import numpy as np

from compiler.passes import graph as g
from compiler.passes import nodes
from craft.blocks import MLP, MultiAttentionHead, combine_in_parallel

# An allocator maps the lowered graph to {label: sub-layer index of the node's *last* block}.
Allocator = Callable[[nx.DiGraph], dict[str, int]]


def _next(after: int, parity: int) -> int:
    """First sub-layer index > `after` with the given parity (0 attention, 1 MLP)."""
    index = after + 1
    return index if index % 2 == parity else index + 1


def longest_path(graph: nx.DiGraph, ready: dict[str, int] | None = None) -> dict[str, int]:
    """ASAP schedule: each node in the first sub-layer of its kind after all of its inputs.

    `ready` gives some nodes their sub-layer beforehand (a loop body starts after the layers
    before the loop, `compiler.passes.loops`); they are kept as given.
    """
    ready = dict(ready or {})
    for label in g.sop_nodes(graph):
        if label in ready:
            continue
        kind = graph.nodes[label][nodes.KIND]
        if kind.embedded:
            ready[label] = -1
            continue
        after = max((ready[i] for i in g.node_inputs(graph, label)), default=-1)
        if kind.elementwise:
            ready[label] = _next(after, 1)
        elif kind is g.NodeKind.AGGREGATE:
            ready[label] = _next(after, 0)
        else:  # selector_width: attention, then the MLP right after it
            ready[label] = _next(after, 0) + 1
    return ready


def _sublayer_kind(kind: g.NodeKind) -> tuple[int, int]:
    """(parity of the node's first block, number of blocks) for a computing node."""
    if kind.elementwise:
        return 1, 1
    if kind is g.NodeKind.AGGREGATE:
        return 0, 1
    return 0, 2  # selector_width: attention, then the MLP right after it


def milp_schedule(graph: nx.DiGraph) -> dict[str, int]:
    """Exact schedule with the fewest layers, from a mixed-integer program (scipy / HiGHS).

    Variables: per computing node the layer `z` of its first block (its first sub-layer is
    `2z + parity`), and the layer count `L`. Constraints: a node's first block comes after the
    last block of every input; every last block lies below `2L`. Objective: `L`, then (with a
    weight too small to trade a layer) the sum of the `z`, so the schedule is as early as
    possible. Returns the same `{label: sub-layer of the last block}` as `longest_path`.
    """
    from scipy.optimize import Bounds, LinearConstraint, milp

    ready = {label: -1 for label in g.sop_nodes(graph) if graph.nodes[label][nodes.KIND].embedded}
    computing = [label for label in g.sop_nodes(graph) if label not in ready]
    if not computing:
        return ready
    column = {label: i for i, label in enumerate(computing)}
    n = len(computing)
    shape = {label: _sublayer_kind(graph.nodes[label][nodes.KIND]) for label in computing}
    rows, lower = [], []
    for label in computing:
        parity, blocks = shape[label]
        for source in g.node_inputs(graph, label):
            if source in ready:
                continue  # embeddings come before every sub-layer
            # 2 z_v + p_v >= 2 z_u + p_u + (blocks_u - 1) + 1
            src_parity, src_blocks = shape[source]
            row = np.zeros(n + 1)
            row[column[label]] += 2
            row[column[source]] -= 2
            rows.append(row)
            lower.append(src_parity + src_blocks - parity)
        # last block below 2L: 2 z_v + p_v + blocks_v - 1 <= 2 L - 1
        row = np.zeros(n + 1)
        row[column[label]] = -2
        row[n] = 2
        rows.append(row)
        lower.append(parity + blocks)
    # Every z is below n (the longest possible chain), so a weight 1/(n*n+1) on sum(z) never
    # outweighs one layer.
    cost = np.full(n + 1, 1.0 / (n * n + 1))
    cost[n] = 1.0
    result = milp(
        cost,
        constraints=LinearConstraint(np.array(rows), np.array(lower, dtype=float), np.inf),
        integrality=np.ones(n + 1),
        bounds=Bounds(0, 2 * n + 2),
    )
    if not result.success:  # pragma: no cover - the program is always feasible (z_v = depth)
        raise RuntimeError(f"layer allocation MILP failed: {result.message}")
    layers = np.round(result.x).astype(int)
    for label in computing:
        parity, blocks = shape[label]
        ready[label] = 2 * int(layers[column[label]]) + parity + blocks - 1
    return ready


def place_blocks(graph: nx.DiGraph, allocator: Allocator = longest_path) -> list[MLP | MultiAttentionHead | None]:
    """The model's sub-layers: each holds the blocks `allocator` placed there, run in parallel
    (`None` for an empty sub-layer). Records every node's transformer layer as `LAYER`.

    A node's blocks (`graph.BLOCKS`, in execution order) end at its scheduled sub-layer.
    """
    schedule = allocator(graph)
    placed: dict[int, list] = {}
    for label in g.sop_nodes(graph):
        blocks = graph.nodes[label].get(nodes.BLOCKS, ())
        first = schedule[label] - (len(blocks) - 1)
        for offset, (parity, block) in enumerate(blocks):
            index = first + offset
            if index % 2 != parity:  # pragma: no cover - the allocator guarantees parity
                raise AssertionError(f"{label}: block placed in a sub-layer of the wrong kind")
            placed.setdefault(index, []).append(block)
        graph.nodes[label][nodes.LAYER] = schedule[label] // 2 if blocks else None
    count = max(placed, default=-1) + 1
    return [combine_in_parallel(placed[i]) if i in placed else None for i in range(count)]
