"""Trace a RASP program into a `networkx.DiGraph`, and the graph vocabulary every pass shares.

One node per RASP expression (s-ops and selectors), keyed by its label, made unique first
(`compiler.passes.relabel`: a second expression with a taken name becomes `name_2`; the node's
`nodes.NAME` attribute keeps the user's name); an edge runs from each child to the expression that
reads it. Later passes add node attributes (value set, output space, Craft blocks, layer); this
pass records only the expression and its `NodeKind`. The queries at the end (`node_inputs`,
`operation`, `sop_space`, ...) are how later passes read a node.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import networkx as nx

from compiler.errors import UnsupportedProgramError
from compiler.passes import nodes, selectors
from compiler.passes.outputs import Outputs, programs_of
from compiler.passes.primitives import expand_length
from compiler.passes.relabel import unique_labels
from craft.bases import INDICES_NAME, TOKENS_NAME, BasisDirection, VectorSpaceWithBasis
from rasp import rasp


class NodeKind(enum.Enum):
    """The operation kinds the compiler lowers; every pass dispatches on these."""

    TOKENS = "tokens"
    INDICES = "indices"
    FULL = "full"
    CONSTANT = "constant"
    MAP = "map"
    SEQUENCE_MAP = "sequence_map"
    LINEAR_SEQUENCE_MAP = "linear_sequence_map"
    AGGREGATE = "aggregate"
    SELECTOR_WIDTH = "selector_width"
    SELECT = "select"
    CONSTANT_SELECTOR = "constant_selector"
    SELECTOR_AND = "selector_and"
    SELECTOR_OR = "selector_or"
    SELECTOR_NOT = "selector_not"

    def __str__(self) -> str:
        return self.value

    @property
    def embedded(self) -> bool:
        """Written by the embeddings: no block computes it."""
        return self in (NodeKind.TOKENS, NodeKind.INDICES, NodeKind.FULL, NodeKind.CONSTANT)

    @property
    def elementwise(self) -> bool:
        """Computed position by position: one MLP."""
        return self in (NodeKind.MAP, NodeKind.SEQUENCE_MAP, NodeKind.LINEAR_SEQUENCE_MAP)

    @property
    def attention(self) -> bool:
        """Reads other positions through a selector: an attention head (and, for a selector
        width, the MLP after it)."""
        return self in (NodeKind.AGGREGATE, NodeKind.SELECTOR_WIDTH)


# Order matters: subclasses before their bases.
_EXPRESSION_KINDS: tuple[tuple[type, NodeKind], ...] = (
    (rasp.TokensType, NodeKind.TOKENS),
    (rasp.IndicesType, NodeKind.INDICES),
    (rasp.Full, NodeKind.FULL),
    (rasp.ConstantSOp, NodeKind.CONSTANT),
    (rasp.LinearSequenceMap, NodeKind.LINEAR_SEQUENCE_MAP),
    (rasp.SequenceMap, NodeKind.SEQUENCE_MAP),
    (rasp.Map, NodeKind.MAP),
    (rasp.Aggregate, NodeKind.AGGREGATE),
    (rasp.SelectorWidth, NodeKind.SELECTOR_WIDTH),
    (rasp.Select, NodeKind.SELECT),
    (rasp.ConstantSelector, NodeKind.CONSTANT_SELECTOR),
    (rasp.SelectorAnd, NodeKind.SELECTOR_AND),
    (rasp.SelectorOr, NodeKind.SELECTOR_OR),
    (rasp.SelectorNot, NodeKind.SELECTOR_NOT),
)


def expression_kind(expr: rasp.RASPExpr) -> NodeKind:
    """Classify an expression into the operation kinds the compiler lowers."""
    for cls, kind in _EXPRESSION_KINDS:
        if isinstance(expr, cls):
            return kind
    if isinstance(expr, (rasp.Loop, rasp.LoopState)):
        raise UnsupportedProgramError(
            [f"{expr.label}: a Loop compiles only as the whole program (compile_rasp(loop, ...)); "
             "move what reads the loop's result into its body, or unroll the loop in Python"]
        )
    raise UnsupportedProgramError(
        [f"{expr.label}: expression type {type(expr).__name__} is not supported by the compiler"]
    )


def trace(program: rasp.SOp | Outputs) -> nx.DiGraph:
    """Return the expression graph of `program`.

    `graph.graph[nodes.SINKS]` holds the output labels: the program's, or, for an `Outputs` root
    (several programs compiled side by side), each program's in order; `nodes.SINK` is the first.
    """
    for output in programs_of(program):
        if not isinstance(output, rasp.SOp):
            raise UnsupportedProgramError(
                [f"the program must be an s-op, got {type(output).__name__} ({output!r}); "
                 "compile an s-op such as Aggregate(...) or Map(...), not a selector"]
            )
    program, uses_length = expand_length(program)
    program, user_names = unique_labels(program)
    sinks = tuple(output.label for output in programs_of(program))
    if len(set(sinks)) < len(sinks):
        repeated = sorted({label for label in sinks if sinks.count(label) > 1})
        raise UnsupportedProgramError(
            [f"{repeated[0]}: the same s-op is given twice as an output; list each program once"]
        )
    graph = nx.DiGraph(**{nodes.SINK: sinks[0], nodes.SINKS: sinks, nodes.USES_LENGTH: uses_length})
    stack = list(programs_of(program))
    while stack:
        expr = stack.pop()
        existing = graph.nodes.get(expr.label)
        if existing is not None and nodes.EXPR in existing:
            if existing[nodes.EXPR] is not expr:
                raise UnsupportedProgramError(
                    [f"two different expressions share the label {expr.label!r}; "
                     "give each a distinct name with .named(...)"]
                )
            continue
        name = user_names.get(expr.label, expr.label)
        graph.add_node(expr.label, **{nodes.EXPR: expr, nodes.KIND: expression_kind(expr), nodes.NAME: name})
        for child in expr.children:
            graph.add_edge(child.label, expr.label)
            stack.append(child)
    # A ConstantSelector compares positions: its head reads `indices`, a child it does not list.
    for label, data in list(graph.nodes(data=True)):
        if data[nodes.KIND] is NodeKind.CONSTANT_SELECTOR:
            if INDICES_NAME not in graph:
                graph.add_node(INDICES_NAME, **{nodes.EXPR: rasp.indices, nodes.KIND: NodeKind.INDICES, nodes.NAME: INDICES_NAME})
            graph.add_edge(INDICES_NAME, label)
    if TOKENS_NAME not in graph:
        raise UnsupportedProgramError(
            [f"{sinks[0]}: the program never reads `tokens`, so its output does not depend "
             "on the input; build it from rasp.tokens (and rasp.indices)"]
        )
    if not nx.is_directed_acyclic_graph(graph):  # pragma: no cover - RASP builds DAGs only
        raise UnsupportedProgramError(["the expression graph has a cycle"])
    graph.graph[nodes.SOURCES] = tuple(
        label for label in (TOKENS_NAME, INDICES_NAME) if label in graph
    )
    return graph


def sop_nodes(graph: nx.DiGraph) -> list[str]:
    """Labels of the s-op nodes (not selectors), in a deterministic topological order."""
    return [
        label
        for label in nx.lexicographical_topological_sort(graph)
        if isinstance(graph.nodes[label][nodes.EXPR], rasp.SOp)
    ]


def consumers(graph: nx.DiGraph, label: str) -> list[str]:
    """S-op nodes that read `label`, looking through selectors."""
    found: list[str] = []
    for succ in graph.successors(label):
        if isinstance(graph.nodes[succ][nodes.EXPR], rasp.SOp):
            found.append(succ)
        else:
            found.extend(consumers(graph, succ))
    return sorted(set(found))


def node_inputs(graph: nx.DiGraph, label: str) -> tuple[str, ...]:
    """The s-op labels a node reads (through its selector, for attention nodes)."""
    node = graph.nodes[label]
    if nodes.INPUTS in node:
        return tuple(node[nodes.INPUTS])
    expr = node[nodes.EXPR]
    kind = node[nodes.KIND]
    if kind.embedded:
        return ()
    if kind is NodeKind.MAP:
        return (expr.inner.label,)
    if kind in (NodeKind.SEQUENCE_MAP, NodeKind.LINEAR_SEQUENCE_MAP):
        return (expr.fst.label, expr.snd.label)
    leaves = selectors.conjunction(expr.selector)
    read = {name for leaf in leaves for name in (leaf.keys, leaf.queries)}
    if kind is NodeKind.AGGREGATE:
        read.add(expr.sop.label)
    return tuple(sorted(read))


def operation(graph: nx.DiGraph, label: str) -> tuple[Callable[..., Any], tuple[str, ...]]:
    """An elementwise node's function and the labels it reads, after any fusion."""
    node = graph.nodes[label]
    if nodes.FN in node:
        return node[nodes.FN], tuple(node[nodes.INPUTS])
    return node[nodes.EXPR].f, node_inputs(graph, label)


def is_numerical(graph: nx.DiGraph, label: str) -> bool:
    """Whether the s-op `label` is numerically encoded (one direction) rather than one-hot."""
    return rasp.is_numerical(graph.nodes[label][nodes.EXPR])


def sop_space(graph: nx.DiGraph, label: str) -> VectorSpaceWithBasis:
    """The residual subspace an s-op owns: one-hot over its values, or one direction."""
    node = graph.nodes[label]
    if is_numerical(graph, label):
        return VectorSpaceWithBasis((BasisDirection(label),))
    return VectorSpaceWithBasis.from_values(label, node[nodes.VALUE_SET])


NONE_SUFFIX = "_is_none"


def none_direction(label: str) -> BasisDirection:
    """The none flag of a numerical s-op that can be None (`craft.chamber.definedness`)."""
    return BasisDirection(label + NONE_SUFFIX)


def has_none_flag(graph: nx.DiGraph, label: str) -> bool:
    """Whether the s-op is numerical and can be None, so it owns a none flag direction."""
    return is_numerical(graph, label) and bool(graph.nodes[label].get(nodes.NULLABLE))


def none_space(graph: nx.DiGraph, label: str) -> VectorSpaceWithBasis:
    """The s-op's none flag as a space (empty when it has none)."""
    return VectorSpaceWithBasis((none_direction(label),) if has_none_flag(graph, label) else ())


def hidden_name(label: str) -> str:
    """The name of a node's MLP hidden directions (unique per node, so parallel MLPs merge)."""
    return f"{label}_hidden"
