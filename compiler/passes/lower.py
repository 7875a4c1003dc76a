"""Lower every s-op node to Craft blocks from the chamber.

Before lowering, chains of elementwise operations are fused: a `Map` whose input is another
`Map` (or a categorical `SequenceMap`) read by nothing else becomes one MLP, saving a layer and
the intermediate's residual directions. Fused nodes keep their own label; the absorbed node
leaves the graph. After lowering, each computing node has `BLOCKS`: a tuple of
`(parity, block)` with parity 0 for attention and 1 for MLP, in execution order.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Callable
from typing import Any

import networkx as nx
import numpy as np

from compiler.passes import graph as g
from compiler.passes import selectors
from compiler.passes.allocate import EMBEDDED_KINDS, node_inputs
from compiler.passes.optimize import fold_maps
from craft.bases import BasisDirection, VectorSpaceWithBasis, join_vector_spaces
from craft.blocks import MLP, AttentionHead, MultiAttentionHead
from craft.chamber import categorical_attn, categorical_mlp, numerical_fit, numerical_mlp, selector_width
from craft.maps import BilinearMap, FactoredBilinearMap, sum_matrices
from rasp import rasp

ONE = BasisDirection("one")

# Node attribute of a numerical -> numerical Map: its `NumericalMapFit` (construction, error).
NUMERICAL_FIT = "numerical_fit"
# Graph attribute: {label: NumericalMapFit} measured by validation, reused here when it was
# built for the same BOS direction.
NUMERICAL_FITS = "numerical_fits"


@dataclasses.dataclass(frozen=True)
class LoweringOptions:
    """Knobs of the lowering shared by every block."""

    max_seq_len: int
    causal: bool
    bos: BasisDirection
    mlp_exactness: float = 100.0
    coldness: float = 100.0

    @property
    def one_space(self) -> VectorSpaceWithBasis:
        return VectorSpaceWithBasis((ONE,))

    @property
    def bos_space(self) -> VectorSpaceWithBasis:
        return VectorSpaceWithBasis((self.bos,))


def output_space(graph: nx.DiGraph, label: str) -> VectorSpaceWithBasis:
    """The residual subspace an s-op owns: one-hot over its values, or one direction."""
    node = graph.nodes[label]
    if g.OUTPUT_SPACE not in node:
        if rasp.is_numerical(node[g.EXPR]):
            node[g.OUTPUT_SPACE] = VectorSpaceWithBasis((BasisDirection(label),))
        else:
            node[g.OUTPUT_SPACE] = VectorSpaceWithBasis.from_values(label, node[g.VALUE_SET])
    return node[g.OUTPUT_SPACE]


def _compose(outer: Callable, inner: Callable) -> Callable:
    """`outer ∘ inner` with RASP's None propagation (outer is never called on None)."""

    def fused(*args: Any) -> Any:
        middle = inner(*args)
        return None if middle is None else outer(middle)

    return fused


def _is_numerical(graph: nx.DiGraph, label: str) -> bool:
    return rasp.is_numerical(graph.nodes[label][g.EXPR])


def _operation(graph: nx.DiGraph, label: str) -> tuple[Callable, tuple[str, ...]]:
    node = graph.nodes[label]
    if "fn" in node:
        return node["fn"], tuple(node["inputs"])
    return node[g.EXPR].f, node_inputs(graph, label)


def fuse_elementwise(graph: nx.DiGraph) -> None:
    """Fuse `Map(f, X)` into `X` when X is a Map or categorical SequenceMap read only here."""
    sink = graph.graph["sink"]
    changed = True
    while changed:
        changed = False
        for label in g.sop_nodes(graph):
            if graph.nodes[label][g.KIND] != "map":
                continue
            (inner,) = _operation(graph, label)[1]
            inner_node = graph.nodes[inner]
            fusable = inner_node[g.KIND] == "map" or (
                inner_node[g.KIND] == "sequence_map"
                and not any(_is_numerical(graph, i) for i in _operation(graph, inner)[1])
            )
            if not fusable or inner == sink or list(graph.successors(inner)) != [label]:
                continue
            outer_f, _ = _operation(graph, label)
            inner_f, inputs = _operation(graph, inner)
            node = graph.nodes[label]
            node["fn"] = _compose(outer_f, inner_f)
            node["inputs"] = inputs
            node[g.KIND] = inner_node[g.KIND]
            node["fused"] = tuple(inner_node.get("fused", ())) + (inner,)
            graph.remove_node(inner)
            for source in inputs:
                graph.add_edge(source, label)
            changed = True
            break


def _hidden(label: str) -> str:
    return f"{label}_hidden"


def numerical_map_operation(graph: nx.DiGraph, label: str) -> tuple[Callable, str] | None:
    """`(f, input label)` when the (fused) node lowers to a numerical -> numerical Map MLP."""
    node = graph.nodes[label]
    if node[g.KIND] not in ("map", "sequence_map") or not _is_numerical(graph, label):
        return None
    fn, inputs = _operation(graph, label)
    if len(set(inputs)) != 1 or not _is_numerical(graph, inputs[0]):
        return None
    if len(inputs) == 2:  # f(x, x) of one s-op
        binary = fn
        fn = lambda x: binary(x, x)  # noqa: E731
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
        output_space(graph, inner),
        output_space(graph, label),
        graph.nodes[inner][g.VALUE_SET],
        VectorSpaceWithBasis((ONE,)),
        VectorSpaceWithBasis((bos,)),
        exactness=mlp_exactness,
        hidden_name=_hidden(label),
    )


def _lower_map(graph: nx.DiGraph, label: str, options: LoweringOptions) -> MLP:
    fn, (inner,) = _operation(graph, label)
    in_space, out_space = output_space(graph, inner), output_space(graph, label)
    numerical_in, numerical_out = _is_numerical(graph, inner), _is_numerical(graph, label)
    if not numerical_in:
        if numerical_out:
            return categorical_mlp.map_categorical_to_numerical_mlp(
                in_space, out_space, fn, hidden_name=_hidden(label), one_space=options.one_space
            )
        return categorical_mlp.map_categorical_mlp(
            in_space, out_space, fn, hidden_name=_hidden(label), one_space=options.one_space
        )
    if numerical_out:
        fit = graph.graph.get(NUMERICAL_FITS, {}).get(label)
        if fit is None or options.bos not in fit.mlp.input_space or options.mlp_exactness != 100:
            fit = fit_numerical_map(graph, label, options.mlp_exactness, options.bos)
        graph.nodes[label][NUMERICAL_FIT] = fit
        return fit.mlp
    return numerical_mlp.map_numerical_to_categorical_mlp(
        fn,
        in_space,
        out_space,
        graph.nodes[inner][g.VALUE_SET],
        options.one_space,
        options.bos_space,
        exactness=options.mlp_exactness,
        hidden_name=_hidden(label),
    )


def _lower_sequence_map(graph: nx.DiGraph, label: str, options: LoweringOptions) -> MLP:
    node = graph.nodes[label]
    fn, (fst, snd) = _operation(graph, label)
    out_space = output_space(graph, label)
    linear = (
        node[g.KIND] == "linear_sequence_map"
        and _is_numerical(graph, fst)
        and _is_numerical(graph, label)
    )
    if fst == snd and not linear:  # f(x, x) reads one s-op: a Map
        diagonal = lambda x: fn(x, x)  # noqa: E731
        node["fn"], node["inputs"] = diagonal, (fst,)
        return _lower_map(graph, label, options)
    if linear:  # exact, and no discretisation error even when fst == snd
        expr = node[g.EXPR]
        return numerical_mlp.linear_sequence_map_numerical_mlp(
            output_space(graph, fst),
            output_space(graph, snd),
            out_space,
            expr.fst_fac,
            expr.snd_fac,
            hidden_name=_hidden(label),
        )
    return categorical_mlp.sequence_map_categorical_mlp(
        output_space(graph, fst),
        output_space(graph, snd),
        out_space,
        fn,
        options.one_space,
        hidden_name=_hidden(label),
    )


def direct_attention(
    graph: nx.DiGraph, selector: rasp.Selector, folds: dict | None = None
) -> tuple[BilinearMap | FactoredBilinearMap, int]:
    """The summed 0/1 predicate matrix of a selector's conjunction, and its number of leaves.

    `folds` (from `compiler.passes.optimize.fold_maps`) names Maps whose inputs the head reads instead.
    """
    leaves = selectors.conjunction(selector)
    if folds:
        leaves = fold_maps.fold_leaves(leaves, folds)
    parts = [
        categorical_attn.selector_qk(
            output_space(graph, leaf.queries), output_space(graph, leaf.keys), leaf.predicate
        )
        for leaf in leaves
    ]
    query_space = join_vector_spaces(*(p.left_space for p in parts))
    key_space = join_vector_spaces(*(p.right_space for p in parts))
    if any(isinstance(p, FactoredBilinearMap) for p in parts):  # large: factors side by side
        return functools.reduce(operator.add, parts).on_spaces(query_space, key_space), len(leaves)
    shape = (query_space.num_dims, key_space.num_dims)
    matrix = sum_matrices([part.on_spaces(query_space, key_space).matrix for part in parts], shape)
    return BilinearMap(query_space, key_space, matrix), len(leaves)


def _lower_aggregate(
    graph: nx.DiGraph, label: str, options: LoweringOptions
) -> AttentionHead | MultiAttentionHead:
    expr = graph.nodes[label][g.EXPR]
    folds = graph.nodes[label].get(fold_maps.FOLDED, {})
    direct, n_terms = direct_attention(graph, expr.selector, folds)
    out_space = output_space(graph, label)
    if expr.sop.label in folds:
        folded = folds[expr.sop.label]
        value_map = fold_maps.value_map(
            output_space(graph, folded.inner), out_space, folded.fn, _is_numerical(graph, label)
        )
    elif _is_numerical(graph, label):
        value_map = categorical_attn.numerical_value_map(output_space(graph, expr.sop.label), out_space)
    else:
        value_map = categorical_attn.categorical_value_map(output_space(graph, expr.sop.label), out_space)
    head = categorical_attn.attention_head(
        direct,
        n_terms,
        value_map,
        options.bos_space,
        options.one_space,
        causal=options.causal,
        always_attend_to_bos=False,
        coldness=options.coldness,
    )
    default_row = _default_row(graph, label, out_space)
    if default_row is None:
        return head
    heads = categorical_attn.bos_default_heads(
        head, default_row, options.bos_space, options.one_space, coldness=options.coldness
    )
    return MultiAttentionHead(heads)


def _default_row(graph: nx.DiGraph, label: str, out_space: VectorSpaceWithBasis) -> np.ndarray | None:
    """The output row an Aggregate's BOS key must carry for its default (None: no default to
    write, i.e. default 0 / None, or a selector that always selects)."""
    expr = graph.nodes[label][g.EXPR]
    if not needs_bos_default(graph, label):
        return None
    row = np.zeros(out_space.num_dims)
    if _is_numerical(graph, label):
        row[0] = float(expr.default)
    else:
        row[out_space.index(BasisDirection(label, expr.default))] = 1.0
    return row


def needs_bos_default(graph: nx.DiGraph, label: str) -> bool:
    """Whether an Aggregate's default must be written by its head (BOS carries it)."""
    expr = graph.nodes[label][g.EXPR]
    if _is_numerical(graph, label):
        if expr.default == 0:
            return False
    elif expr.default is None:
        return False
    try:
        return not selectors.always_selects(graph, label, selectors.conjunction(expr.selector))
    except Exception:  # noqa: BLE001 - validation reports selector problems
        return False


def _lower_selector_width(
    graph: nx.DiGraph, label: str, options: LoweringOptions
) -> tuple[AttentionHead, MLP]:
    expr = graph.nodes[label][g.EXPR]
    direct, n_terms = direct_attention(graph, expr.selector, graph.nodes[label].get(fold_maps.FOLDED))
    return selector_width.selector_width(
        direct,
        n_terms,
        output_space(graph, label),
        options.max_seq_len,
        options.bos_space,
        options.one_space,
        categorical_output=not _is_numerical(graph, label),
        causal=options.causal,
        coldness=options.coldness,
        hidden_name=_hidden(label),
    )


def lower(graph: nx.DiGraph, options: LoweringOptions) -> None:
    """Give every s-op node its `OUTPUT_SPACE` and every computing node its `BLOCKS`."""
    for label in g.sop_nodes(graph):
        output_space(graph, label)
        kind = graph.nodes[label][g.KIND]
        if kind in EMBEDDED_KINDS:
            blocks: tuple = ()
        elif kind == "map":
            blocks = ((1, _lower_map(graph, label, options)),)
        elif kind in ("sequence_map", "linear_sequence_map"):
            blocks = ((1, _lower_sequence_map(graph, label, options)),)
        elif kind == "aggregate":
            blocks = ((0, _lower_aggregate(graph, label, options)),)
        elif kind == "selector_width":
            head, mlp = _lower_selector_width(graph, label, options)
            blocks = ((0, head), (1, mlp))
        else:  # pragma: no cover - graph.expression_kind admits nothing else for s-ops
            raise AssertionError(kind)
        graph.nodes[label][g.BLOCKS] = blocks
