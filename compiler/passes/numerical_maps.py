"""The measured MLP of every numerical -> numerical Map, shared by validation and lowering.

Validation builds each such Map's MLP (`craft.chamber.numerical_fit`) and measures its error on
the input's value set, refusing Maps above the tolerance; lowering reuses the fit it measured
(`nodes.NUMERICAL_FITS` on the graph) instead of building it twice.

A function that returns None on some input values is built as two MLPs on the same input: the
value MLP of `NoneAsZero(f)` (0 where f is None, as a numerical s-op's value direction holds
there) and the none flag MLP of `IsNone(f)` (1 where f is None, 0 elsewhere), both measured.
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


@dataclasses.dataclass(frozen=True)
class NoneAsZero:
    """`f(x)`, or 0 where it is None: the value a None numerical s-op holds."""

    f: Callable[[Any], Any]

    def __call__(self, x: Any) -> Any:
        y = self.f(x)
        return 0 if y is None else y


@dataclasses.dataclass(frozen=True)
class IsNone:
    """1 where `f(x)` is None, else 0: the none flag of a numerical Map's output."""

    f: Callable[[Any], Any]

    def __call__(self, x: Any) -> int:
        return 1 if self.f(x) is None else 0


def returns_none(graph: nx.DiGraph, label: str) -> bool:
    """Whether a numerical -> numerical Map node's function gives None on its input's values."""
    operation = numerical_map_operation(graph, label)
    if operation is None:
        return False
    fn, inner = operation
    return any(fn(x) is None for x in graph.nodes[inner][nodes.VALUE_SET])


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
    return _fit(graph, NoneAsZero(fn), inner, g.sop_space(graph, label), mlp_exactness, bos, g.hidden_name(label))


def fit_none_flag(
    graph: nx.DiGraph, label: str, mlp_exactness: float, bos: BasisDirection
) -> numerical_fit.NumericalMapFit | None:
    """The measured MLP writing the none flag of a numerical -> numerical Map node whose
    function returns None on some input values (None for other nodes)."""
    if not returns_none(graph, label):
        return None
    operation = numerical_map_operation(graph, label)
    assert operation is not None, label  # returns_none holds only for such a Map
    fn, inner = operation
    return _fit(graph, IsNone(fn), inner, g.none_space(graph, label), mlp_exactness, bos, f"{label}_none_table")


def _fit(
    graph: nx.DiGraph,
    fn: Callable[[Any], Any],
    inner: str,
    out_space: VectorSpaceWithBasis,
    mlp_exactness: float,
    bos: BasisDirection,
    hidden_name: str,
) -> numerical_fit.NumericalMapFit:
    return numerical_fit.fit_numerical_map(
        fn,
        g.sop_space(graph, inner),
        out_space,
        graph.nodes[inner][nodes.VALUE_SET],
        VectorSpaceWithBasis((ONE,)),
        VectorSpaceWithBasis((bos,)),
        exactness=mlp_exactness,
        hidden_name=hidden_name,
    )
