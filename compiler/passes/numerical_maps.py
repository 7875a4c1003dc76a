"""The measured MLP of every numerical -> numerical Map, shared by validation and lowering.

Validation builds each such Map's MLP (`craft.chamber.numerical_fit`) and measures its error on
the input's value set, refusing Maps above the tolerance; lowering reuses the fit it measured
(`nodes.NUMERICAL_FITS` on the graph) instead of building it twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import networkx as nx

from compiler.passes import graph as g
from compiler.passes import nodes
from craft.bases import ONE, BasisDirection, VectorSpaceWithBasis
from craft.chamber import numerical_fit


@dataclasses.dataclass(frozen=True)
class Diagonal:
    """`f(x, x)`: a SequenceMap reading one s-op twice, as a function of that s-op."""

    binary: Callable[[Any, Any], Any]

    def __call__(self, x: Any) -> Any:
        return self.binary(x, x)


def numerical_map_operation(graph: nx.DiGraph, label: str) -> tuple[Callable, str] | None:
    """`(f, input label)` when the (fused) node lowers to a numerical -> numerical Map MLP."""
    node = graph.nodes[label]
    if node[nodes.KIND] not in (g.NodeKind.MAP, g.NodeKind.SEQUENCE_MAP) or not g.is_numerical(graph, label):
        return None
    fn, inputs = g.operation(graph, label)
    if len(set(inputs)) != 1 or not g.is_numerical(graph, inputs[0]):
        return None
    if len(inputs) == 2:  # f(x, x) of one s-op
        fn = Diagonal(fn)
    return fn, inputs[0]


def fit_numerical_map(
    graph: nx.DiGraph, label: str, mlp_exactness: float, bos: BasisDirection
) -> numerical_fit.NumericalMapFit | None:
    """The measured MLP of a numerical -> numerical Map node (None for other nodes)."""
    operation = numerical_map_operation(graph, label)
    if operation is None:
        return None
    fn, inner = operation
    return numerical_fit.fit_numerical_map(
        fn,
        g.sop_space(graph, inner),
        g.sop_space(graph, label),
        graph.nodes[inner][nodes.VALUE_SET],
        VectorSpaceWithBasis((ONE,)),
        VectorSpaceWithBasis((bos,)),
        exactness=mlp_exactness,
        hidden_name=g.hidden_name(label),
    )
