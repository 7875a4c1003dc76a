"""Trace a RASP program into a `networkx.DiGraph`.

One node per RASP expression (s-ops and selectors), keyed by its label, made unique first
(`compiler.passes.relabel`: a second expression with a taken name becomes `name_2`; the node's `NAME`
attribute keeps the user's name); an edge runs from each child to the expression that reads it. Later passes add node attributes (value set, output space,
Craft blocks, layer); this pass records only the expression and what kind of operation it is.
"""

from __future__ import annotations

import networkx as nx

from compiler.errors import UnsupportedProgramError
from compiler.passes.primitives import expand_length
from compiler.passes.relabel import unique_labels
from rasp import rasp

# Node attribute names, shared by every pass.
EXPR = "expr"
KIND = "kind"
VALUE_SET = "value_set"
NULLABLE = "nullable"
BY_POSITION = "by_position"
OUTPUT_SPACE = "output_space"
BLOCKS = "blocks"
LAYER = "layer"
USES_LENGTH = "uses_length"  # graph attribute: the program reads rasp.length
NAME = "name"  # the user's label (node keys get a suffix where two expressions share it)


def expression_kind(expr: rasp.RASPExpr) -> str:
    """Classify an expression into the operation kinds the compiler lowers."""
    # Order matters: subclasses before their bases.
    kinds: tuple[tuple[type, str], ...] = (
        (rasp.TokensType, "tokens"),
        (rasp.IndicesType, "indices"),
        (rasp.Full, "full"),
        (rasp.ConstantSOp, "constant"),
        (rasp.LinearSequenceMap, "linear_sequence_map"),
        (rasp.SequenceMap, "sequence_map"),
        (rasp.Map, "map"),
        (rasp.Aggregate, "aggregate"),
        (rasp.SelectorWidth, "selector_width"),
        (rasp.Select, "select"),
        (rasp.ConstantSelector, "constant_selector"),
        (rasp.SelectorAnd, "selector_and"),
        (rasp.SelectorOr, "selector_or"),
        (rasp.SelectorNot, "selector_not"),
    )
    for cls, kind in kinds:
        if isinstance(expr, cls):
            return kind
    raise UnsupportedProgramError(
        [f"{expr.label}: expression type {type(expr).__name__} is not supported by the compiler"]
    )


def trace(program: rasp.SOp) -> nx.DiGraph:
    """Return the expression graph of `program`; `graph.graph["sink"]` is the output's label."""
    if not isinstance(program, rasp.SOp):
        raise UnsupportedProgramError(
            [f"the program must be an s-op, got {type(program).__name__} ({program!r}); "
             "compile an s-op such as Aggregate(...) or Map(...), not a selector"]
        )
    program, uses_length = expand_length(program)
    program, user_names = unique_labels(program)
    graph = nx.DiGraph(sink=program.label, **{USES_LENGTH: uses_length})
    stack = [program]
    while stack:
        expr = stack.pop()
        existing = graph.nodes.get(expr.label)
        if existing is not None and EXPR in existing:
            if existing[EXPR] is not expr:
                raise UnsupportedProgramError(
                    [f"two different expressions share the label {expr.label!r}; "
                     "give each a distinct name with .named(...)"]
                )
            continue
        name = user_names.get(expr.label, expr.label)
        graph.add_node(expr.label, **{EXPR: expr, KIND: expression_kind(expr), NAME: name})
        for child in expr.children:
            graph.add_edge(child.label, expr.label)
            stack.append(child)
    # A ConstantSelector compares positions: its head reads `indices`, a child it does not list.
    for label, data in list(graph.nodes(data=True)):
        if data[KIND] == "constant_selector":
            if "indices" not in graph:
                graph.add_node("indices", **{EXPR: rasp.indices, KIND: "indices", NAME: "indices"})
            graph.add_edge("indices", label)
    if "tokens" not in graph:
        raise UnsupportedProgramError(
            [f"{program.label}: the program never reads `tokens`, so its output does not depend "
             "on the input; build it from rasp.tokens (and rasp.indices)"]
        )
    if not nx.is_directed_acyclic_graph(graph):  # pragma: no cover - RASP builds DAGs only
        raise UnsupportedProgramError(["the expression graph has a cycle"])
    graph.graph["sources"] = tuple(
        label for label in ("tokens", "indices") if label in graph
    )
    return graph


def sop_nodes(graph: nx.DiGraph) -> list[str]:
    """Labels of the s-op nodes (not selectors), in a deterministic topological order."""
    return [
        label
        for label in nx.lexicographical_topological_sort(graph)
        if isinstance(graph.nodes[label][EXPR], rasp.SOp)
    ]


def consumers(graph: nx.DiGraph, label: str) -> list[str]:
    """S-op nodes that read `label`, looking through selectors."""
    found: list[str] = []
    for succ in graph.successors(label):
        if isinstance(graph.nodes[succ][EXPR], rasp.SOp):
            found.append(succ)
        else:
            found.extend(consumers(graph, succ))
    return sorted(set(found))
