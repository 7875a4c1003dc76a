"""What the optimisation passes did to one node, in words (for summaries and pictures).

A folded Map or Aggregate leaves the graph, but the node that absorbed it keeps its name in an
attribute; `node_notes` reads those attributes back: the Maps a head folded into its `W_QK` /
`W_OV` (`fold_maps`), the Aggregate whose head now writes a Map of its output (`fold_outputs`),
the Maps fused into a lookup table (`fuse_inputs`, and the elementwise fusion before it) and the
rows a table kept (`prune_tables`).
"""

from __future__ import annotations

import networkx as nx

from compiler.passes.optimize.fold_maps import FOLDED
from compiler.passes.optimize.fold_outputs import FOLDED_OUTPUT
from compiler.passes.optimize.prune_tables import PAIRS

# Node attribute listing the s-ops fused into a node's MLP (set by elementwise fusion and
# `fuse_inputs`).
FUSED = "fused"


def node_notes(graph: nx.DiGraph, label: str) -> tuple[str, ...]:
    """One short phrase per optimisation recorded on node `label` (empty: none)."""
    node = graph.nodes[label]
    notes = []
    if FOLDED_OUTPUT in node:
        notes.append(f"the head of Aggregate {node[FOLDED_OUTPUT].aggregate}, writing Map {label} of it")
    for folded in node.get(FOLDED, {}).values():
        notes.append(f"Map {folded.label} (of {folded.inner}) folded into its {'/'.join(folded.roles)}")
    if node.get(FUSED):
        notes.append(f"fused {', '.join(node[FUSED])} into its MLP")
    if PAIRS in node:
        notes.append(f"table keeps {len(node[PAIRS])} rows")
    return tuple(notes)
