"""The structural circuit: what the weights and the program graph say, before any patching.

In the exact model every residual direction belongs to one s-op (`name:value`), so an edge
source -> port *can* carry information only if the source writes a direction the port reads.
`structural_edges` keeps those edges that also lie on a path to the scored output (read
backwards from the unembedding's scored columns), and names the s-ops each edge carries.
`variable_edges` maps the RASP graph's s-op edges (a -> b, selectors looked through) onto the
component edges that carry `a` into a component writing `b`.

The measured circuit (`compiler.lab.circuits.measure`) can be smaller: a direction that is
constant over the input distribution (`one`, a position under resample ablation) carries nothing
a mean or resample ablation removes.

In a model with a norm (`compile_rasp(norm=...)`) every port reads the whole stream through the
norm's divisor, which the anchor coordinates (`compiler.model.norm`, written by the token
embedding) hold at its gain: so every port also reads those coordinates, and the token
embedding's edge into each port of the circuit is structural, carrying `norm_anchor` (zero
ablation of it divides that port's input by a far smaller number; a mean or resample ablation
leaves the constant anchor where it was).
"""

from __future__ import annotations

import dataclasses

import networkx as nx
import numpy as np

from compiler.lab.circuits.components import AttentionLayer, Network, network
from compiler.model.compiled_model import CompiledModel
from compiler.model.norm import anchor_coordinates


@dataclasses.dataclass(frozen=True)
class Structure:
    """`edges[e]`: edge e of the exact network is structural; `carries[e]`: the s-ops it carries
    (empty when it carries none); `variables`: (s-op a, s-op b, edge names carrying a into b)."""

    edges: np.ndarray
    carries: tuple[tuple[str, ...], ...]
    variables: tuple[tuple[str, str, tuple[str, ...]], ...]


def _rows(matrix: np.ndarray) -> set[int]:
    return set(np.nonzero(np.any(matrix != 0, axis=-1))[0].tolist())


def _cols(matrix: np.ndarray) -> set[int]:
    return set(np.nonzero(np.any(matrix != 0, axis=0))[0].tolist())


def read_write_sets(net: Network, norm_reads: frozenset[int] = frozenset()) -> tuple[list[set[int]], list[set[int]]]:
    """Residual coordinates each source writes and each port reads (exact basis); every port also
    reads `norm_reads` (the anchor coordinates of a normalised model, through the divisor)."""
    writes = [_cols(net.tok_embed), _cols(net.pos_embed)]
    reads: list[set[int]] = []
    for layer in net.layers:
        if isinstance(layer, AttentionLayer):
            for h in range(len(layer.w_q)):
                reads += [_rows(layer.w_q[h]), _rows(layer.w_k[h]), _rows(layer.w_v[h])]
            writes += [_cols(layer.w_o[h]) for h in range(len(layer.w_o))]
        else:
            reads.append(_rows(layer.w_in))
            writes.append(_cols(layer.w_out))
    reads.append(_rows(net.unembed[:, net.columns]))
    return writes, [read | norm_reads for read in reads]


def structural_edges(model: CompiledModel, output: str | None = None, net: Network | None = None) -> Structure:
    """The structural circuit of `model`'s output `output` (default: the first), over the edges
    of `net`, an exact-basis network of `model` (default `network(model, output=output)`; a
    variant that changes the components, such as distributed heads, passes its own)."""
    net = net if net is not None else network(model, output=output)
    labels = model.residual_labels
    writes, reads = read_write_sets(net, frozenset(anchor_coordinates(labels)) if net.norm else frozenset())
    port_index = {p.name: i for i, p in enumerate(net.ports)}
    source_index = {s.name: i for i, s in enumerate(net.sources)}
    shared = [writes[source_index[e.src]] & reads[port_index[e.dst]] for e in net.edges]
    live = np.array([bool(s) for s in shared])
    # Backwards from the unembedding: a source matters if a live edge leads from it to a port
    # of a component that matters.
    matters = {"unembed"}
    for source in reversed(net.sources):
        if any(live[i] and e.src == source.name and e.dst.rsplit(".", 1)[0] in matters for i, e in enumerate(net.edges)):
            matters.add(source.name)
    edges = np.array([live[i] and e.dst.rsplit(".", 1)[0] in matters for i, e in enumerate(net.edges)])
    carries = tuple(tuple(dict.fromkeys(labels[c].split(":", 1)[0] for c in sorted(s))) if on else ()
                    for s, on in zip(shared, edges))
    return Structure(edges, carries, _variables(model, net, edges, carries))


def _sop_inputs(graph: nx.DiGraph, label: str, in_residual: set[str]) -> set[str]:
    """The s-ops `label` reads, looking through selectors and s-ops without residual directions."""
    found: set[str] = set()
    for pred in graph.predecessors(label):
        found |= {pred} if pred in in_residual else _sop_inputs(graph, pred, in_residual)
    return found


def variable_of(name: str, sops: set[str]) -> str:
    """The s-op a residual name belongs to: itself, or the s-op whose hidden directions
    (`<s-op>_hidden...`, an attention-then-MLP pair's intermediate) it names."""
    if name in sops:
        return name
    owners = [sop for sop in sops if name.startswith(f"{sop}_hidden")]
    return max(owners, key=len) if owners else name


def _variables(model: CompiledModel, net: Network, edges: np.ndarray,
               carries: tuple[tuple[str, ...], ...]) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    graph = model.graph
    if graph is None:
        return ()
    in_residual = {label.split(":", 1)[0] for label in model.residual_labels}
    sops = set(graph.nodes)
    writers = {s.name: {variable_of(w, sops) for w in s.writes} for s in net.sources}
    carries = tuple(tuple(variable_of(c, sops) for c in names) for names in carries)
    found = []
    for b in nx.topological_sort(graph):
        if b not in in_residual:
            continue
        for a in sorted(_sop_inputs(graph, b, in_residual)):
            carrying = tuple(
                e.name for i, e in enumerate(net.edges)
                if edges[i] and a in carries[i] and b in writers.get(e.dst.rsplit(".", 1)[0], set())
            )
            found.append((a, b, carrying))
    return tuple(found)
