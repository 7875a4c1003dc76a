"""What a record says about a compiled program besides its weights: graph, placement, values.

* `graph_json`: every node of the compiled graph (after the variant's passes) with its kind,
  encoding, inputs, value set, transformer layer, and its function *tabulated* on its input
  values: a Map as `[[x, f(x)], ...]`, a SequenceMap as `[[x, y, f(x, y)], ...]`, a Select as
  `[[key, query, selected], ...]` (a `Comparison` by name instead). A table longer than
  `MAX_TABLE` entries is left out (`"table": null` with its size), and so is the table of a Select
  whose keys or queries the optimiser folded into the attention head (`"reads_folded": true`: the
  program source still holds the predicate).
* `placements`: per s-op of the program, where the model computes it: the attention heads
  (layer, head) and MLP layers whose output weights write its residual directions (or its
  hidden directions `<label>_hidden...`), read off the weights; s-ops the optimiser fused into
  another node's table name that node (`absorbed_into`).
* `circuit`: the ground-truth circuit of the output, structural: the edges (source component ->
  destination port, named as `compiler.lab.circuits.components` names them) through which a
  residual direction the output depends on flows, with the s-ops each carries
  (`compiler.lab.circuits.structural.structural_edges`). Read off the weights, it costs
  milliseconds; the circuit measured by patching (`compiler.lab.circuits.pipeline`) is not
  recorded (seconds per program).
* `to_json` / `from_json`: plain JSON for values (str, int, float, bool, None), other values by
  `repr`.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Hashable, Iterable
from typing import Any

import networkx as nx
import numpy as np

from compiler.errors import UnsupportedProgramError
from compiler.lab.circuits.components import network
from compiler.lab.circuits.structural import structural_edges, variable_of
from compiler.model.compiled_model import CompiledModel
from compiler.model.config import AttentionSpec, MLPSpec
from compiler.model.weights import head_weights, mlp_weights
from compiler.passes import graph as g
from compiler.passes import nodes
from compiler.passes.discretise import walk
from craft.bases import value_sort_key
from rasp import rasp

MAX_TABLE = 4096


def to_json(data: Any) -> str:
    """Compact JSON with sorted keys; numpy scalars as Python numbers, anything else by repr."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=_plain)


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (tuple, frozenset, set)):
        return list(value)
    return repr(value)


def from_json(text: str) -> Any:
    return json.loads(text)


def _sorted(values: Iterable[Hashable]) -> list:
    return sorted(values, key=value_sort_key)


def _call(f: Any, *args: Any) -> Any:
    try:
        return f(*args)
    except Exception as error:
        return f"<raises {type(error).__name__}>"


def _value_set(graph: nx.DiGraph, label: str) -> list | None:
    values = graph.nodes[label].get(nodes.VALUE_SET)
    return None if values is None else _sorted(values)


def _table(graph: nx.DiGraph, label: str, kind: g.NodeKind) -> dict[str, Any] | None:
    """The node's function as a table over its inputs' value sets (None for other kinds)."""
    node = graph.nodes[label]
    if kind in (g.NodeKind.MAP, g.NodeKind.SEQUENCE_MAP, g.NodeKind.LINEAR_SEQUENCE_MAP):
        fn, inputs = g.operation(graph, label)
        domains = [_value_set(graph, i) or [] for i in inputs]
        size = int(np.prod([len(d) for d in domains]))
        if size > MAX_TABLE:
            return {"table": None, "table_size": size}
        rows = [[*args, _call(fn, *args)] for args in itertools.product(*domains)]
        return {"table": rows, "table_size": size}
    if kind is g.NodeKind.SELECT:
        expr = node[nodes.EXPR]
        if isinstance(expr.predicate, rasp.Comparison):
            return {"comparison": expr.predicate.name}
        if expr.keys.label not in graph or expr.queries.label not in graph:  # folded into the head
            return {"table": None, "table_size": None, "reads_folded": True}
        keys, queries = _value_set(graph, expr.keys.label) or [], _value_set(graph, expr.queries.label) or []
        size = len(keys) * len(queries)
        if size > MAX_TABLE:
            return {"table": None, "table_size": size}
        rows = [[k, q, bool(_call(expr.predicate, k, q))] for k in keys for q in queries]
        return {"table": rows, "table_size": size}
    if kind is g.NodeKind.AGGREGATE:
        return {"default": node[nodes.EXPR].default}
    if kind in (g.NodeKind.FULL, g.NodeKind.CONSTANT):
        expr = node[nodes.EXPR]
        return {"value": expr.fill if kind is g.NodeKind.FULL else list(expr.value)}
    return None


def graph_json(model: CompiledModel) -> str:
    """The compiled graph as JSON: `{"sink": label, "nodes": [...], "edges": [[from, to], ...]}`."""
    graph = model.graph
    out = []
    for label in sorted(graph.nodes):
        node = graph.nodes[label]
        kind = node[nodes.KIND]
        expr = node[nodes.EXPR]
        is_sop = isinstance(expr, rasp.SOp)
        out.append({
            "label": label,
            "name": node.get(nodes.NAME, label),
            "kind": kind.value,
            "encoding": ("numerical" if rasp.is_numerical(expr) else "categorical") if is_sop else None,
            "inputs": list(g.node_inputs(graph, label)) if is_sop else [c.label for c in expr.children],
            "value_set": _value_set(graph, label),
            "layer": node.get(nodes.LAYER),
            "function": _table(graph, label, kind),
            "fused": list(node.get(nodes.FUSED, ())),
        })
    edges = sorted([a, b] for a, b in graph.edges)
    return to_json({"sink": graph.graph[nodes.SINK], "nodes": out, "edges": edges})


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where one s-op of the program is computed in the model."""

    label: str
    kind: str
    encoding: str
    heads: tuple[tuple[int, int], ...]  # (layer, head) of heads writing its directions
    mlps: tuple[int, ...]  # layers whose MLP writes its directions
    embedded: bool  # tokens, indices and constants: written by the embeddings
    absorbed_into: str | None  # the node an optimisation fused it into (not in the graph)

    def as_row(self) -> dict[str, Any]:
        return {
            "label": self.label, "kind": self.kind, "encoding": self.encoding,
            "heads": [{"layer": layer, "head": head} for layer, head in self.heads],
            "mlps": list(self.mlps), "embedded": self.embedded, "absorbed_into": self.absorbed_into,
        }


def _writers(model: CompiledModel) -> dict[str, tuple[set, set]]:
    """label -> ({(layer, head)}, {layer}) of the heads and MLPs writing its directions."""
    labels = set(g.sop_nodes(model.graph))
    basis = model.residual_space.basis
    written: dict[str, tuple[set, set]] = {}

    def note(w_out: np.ndarray, where: Any, slot: int) -> None:
        for column in np.flatnonzero(np.any(w_out != 0, axis=0)):
            owner = variable_of(basis[column].name, labels)
            if owner in labels:
                written.setdefault(owner, (set(), set()))[slot].add(where)

    for index, layer in enumerate(model.config.layers):
        if isinstance(layer, AttentionSpec):
            for head in range(len(layer.heads)):
                note(head_weights(model, index, head).w_o, (index // 2, head), 0)
        elif isinstance(layer, MLPSpec) and layer.w_in.shape[1]:
            note(mlp_weights(model, index).w_out, index // 2, 1)
    return written


def _absorbed(graph: nx.DiGraph) -> dict[str, str]:
    """Program labels an optimisation folded into another node, and that node."""
    into = {}
    for label in graph.nodes:
        node = graph.nodes[label]
        for inner in node.get(nodes.FUSED, ()):
            into[inner] = label
        for inner in node.get(nodes.FOLDED_MAPS, {}):
            into.setdefault(inner, label)
    return into


def _kind(graph: nx.DiGraph, expr: rasp.SOp) -> tuple[str, bool]:
    """(kind, embedded) of an s-op: the kind the compiler gives its type; for a type it rewrites
    before tracing (e.g. SumAggregate), the kind of the node it became, else its class name."""
    try:
        kind = g.expression_kind(expr)
    except UnsupportedProgramError:
        if expr.label not in graph:
            return type(expr).__name__, False
        kind = graph.nodes[expr.label][nodes.KIND]
    return kind.value, kind.embedded


def placements(model: CompiledModel, program: rasp.SOp) -> list[Placement]:
    """Every s-op of `program` (children first) with the heads and MLPs that compute it."""
    graph = model.graph
    writers = _writers(model)
    absorbed = _absorbed(graph)
    out = []
    for expr in walk(program):
        if not isinstance(expr, rasp.SOp):
            continue
        label = expr.label
        kind, embedded = _kind(graph, expr)
        heads, mlps = writers.get(label, (set(), set())) if label in graph else (set(), set())
        out.append(Placement(
            label=label,
            kind=kind,
            encoding="numerical" if rasp.is_numerical(expr) else "categorical",
            heads=tuple(sorted(heads)),
            mlps=tuple(sorted(mlps)),
            embedded=label in graph and embedded,
            absorbed_into=None if label in graph else absorbed.get(label),
        ))
    return out


def circuit(model: CompiledModel) -> list[dict[str, Any]]:
    """The structural circuit of the model's output: `{"src", "dst", "carries"}` per edge."""
    structure = structural_edges(model)
    edges = network(model).edges
    return [{"src": edge.src, "dst": edge.dst, "carries": list(carries)}
            for edge, on, carries in zip(edges, structure.edges, structure.carries) if on]
