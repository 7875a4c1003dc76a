"""What the optimisation passes did to one node, in words (for summaries and pictures).

A folded Map or Aggregate leaves the graph, but the node that absorbed it keeps its name in an
attribute; `node_notes` reads those attributes back: the Maps a head folded into its `W_QK` /
`W_OV` (`fold_maps`), the Aggregate whose head now writes a Map of its output (`fold_outputs`),
the Maps fused into a lookup table (`fuse_inputs`, and the elementwise fusion before it) and the
rows a table kept (`prune_tables`).
"""

from __future__ import annotations

import networkx as nx

from compiler.passes import nodes


def node_notes(graph: nx.DiGraph, label: str) -> tuple[str, ...]:
    """One short phrase per optimisation recorded on node `label` (empty: none)."""
    node = graph.nodes[label]
    notes = []
    if nodes.FOLDED_OUTPUT in node:
        notes.append(f"the head of Aggregate {node[nodes.FOLDED_OUTPUT].aggregate}, writing Map {label} of it")
    for folded in node.get(nodes.FOLDED_MAPS, {}).values():
        notes.append(f"Map {folded.label} (of {folded.inner}) folded into its {'/'.join(folded.roles)}")
    if node.get(nodes.FUSED):
        notes.append(f"fused {', '.join(node[nodes.FUSED])} into its MLP")
    if nodes.TABLE_PAIRS in node:
        notes.append(f"table keeps {len(node[nodes.TABLE_PAIRS])} rows")
    return tuple(notes)
