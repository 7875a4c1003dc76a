"""Lower every s-op node to Craft blocks from the chamber.

Runs on the fused (`compiler.passes.fuse`) and optimised graph. After lowering, each s-op node
has its `OUTPUT_SPACE` and each computing node its `BLOCKS`: a tuple of `(parity, block)` with
parity 0 for attention and 1 for MLP, in execution order.
"""

from __future__ import annotations

import dataclasses
import functools
import operator

import networkx as nx
import numpy as np

from compiler.errors import CompilerError
from compiler.passes import graph as g
from compiler.passes import nodes, selectors, sums
from compiler.passes.numerical_maps import Diagonal, fit_none_flag, fit_numerical_map
from compiler.passes.optimize import fold_maps, record
from craft.bases import ONE, BasisDirection, VectorSpaceWithBasis, bos_direction, join_vector_spaces
from craft.blocks import MLP, AttentionHead, MultiAttentionHead
from craft.chamber import categorical_attn, categorical_mlp, counted_sum, definedness, numerical_mlp, selector_width
from craft.maps import BilinearMap, FactoredBilinearMap, LinearMap, sum_matrices, to_dense
from rasp import rasp
from rasp.functions import Composed


@dataclasses.dataclass(frozen=True)
class LoweringOptions:
    """Knobs of the lowering shared by every block."""

    max_seq_len: int
    causal: bool
    bos: BasisDirection
    mlp_exactness: float = 100.0
    coldness: float = 100.0
    # The `narrow_lookups` pass: categorical Maps get their units per output value where that
    # has fewer non-zeros (`craft.chamber.categorical_mlp`, module docstring).
    narrow_lookups: bool = False
    # Lookup units clamped flat around 0 and 1 (`categorical_mlp.saturated`): a model with a norm,
    # whose every read is off by up to the norm's spread, so errors must not compound.
    saturate: bool = False

    def lookup(self, mlp: MLP) -> MLP:
        """A categorical lookup table as built, or saturated when `saturate`."""
        return categorical_mlp.saturated(mlp, ONE) if self.saturate else mlp

    @property
    def one_space(self) -> VectorSpaceWithBasis:
        return VectorSpaceWithBasis((ONE,))

    @property
    def bos_space(self) -> VectorSpaceWithBasis:
        return VectorSpaceWithBasis((self.bos,))


def output_space(graph: nx.DiGraph, label: str) -> VectorSpaceWithBasis:
    """The residual subspace an s-op owns (`graph.sop_space`), kept on the node as `OUTPUT_SPACE`."""
    node = graph.nodes[label]
    if nodes.OUTPUT_SPACE not in node:
        node[nodes.OUTPUT_SPACE] = g.sop_space(graph, label)
    return node[nodes.OUTPUT_SPACE]


def _lower_map(graph: nx.DiGraph, label: str, options: LoweringOptions) -> MLP:
    fn, (inner,) = g.operation(graph, label)
    in_space, out_space = output_space(graph, inner), output_space(graph, label)
    numerical_in, numerical_out = g.is_numerical(graph, inner), g.is_numerical(graph, label)
    if numerical_in and not graph.nodes[inner][nodes.VALUE_SET]:  # always None: writes nothing
        hidden = VectorSpaceWithBasis((BasisDirection(g.hidden_name(label), "never"),))
        return MLP(LinearMap.zero(in_space, hidden), LinearMap.zero(hidden, out_space))
    if not numerical_in:
        build = categorical_mlp.map_categorical_to_numerical_mlp if numerical_out else categorical_mlp.map_categorical_mlp
        narrow = False
        bos_space: VectorSpaceWithBasis | None = None
        if options.narrow_lookups:  # complement units only where the input is never None
            never_none = not graph.nodes[inner].get(nodes.NULLABLE, True)
            narrow, bos_space = True, options.bos_space if never_none else None
        mlp = build(
            in_space, out_space, fn, hidden_name=g.hidden_name(label), one_space=options.one_space,
            narrow=narrow, bos_space=bos_space,
        )
        if narrow and mlp.hidden_space.num_dims < in_space.num_dims:
            record(graph, [f"narrow_lookups: Map {label} (of {inner}) with {mlp.hidden_space.num_dims} "
                           f"hidden units instead of {in_space.num_dims}"])
        return options.lookup(mlp)
    if numerical_out:
        fit = graph.graph.get(nodes.NUMERICAL_FITS, {}).get(label)
        if fit is None or options.bos not in fit.mlp.input_space or options.mlp_exactness != 100:
            fit = fit_numerical_map(graph, label, options.mlp_exactness, options.bos)
        graph.nodes[label][nodes.NUMERICAL_FIT] = fit
        return fit.mlp
    return numerical_mlp.map_numerical_to_categorical_mlp(
        fn,
        in_space,
        out_space,
        graph.nodes[inner][nodes.VALUE_SET],
        options.one_space,
        options.bos_space,
        exactness=options.mlp_exactness,
        hidden_name=g.hidden_name(label),
    )


def _lower_sequence_map(graph: nx.DiGraph, label: str, options: LoweringOptions) -> MLP:
    node = graph.nodes[label]
    fn, (fst, snd) = g.operation(graph, label)
    out_space = output_space(graph, label)
    linear = (
        node[nodes.KIND] is g.NodeKind.LINEAR_SEQUENCE_MAP
        and g.is_numerical(graph, fst)
        and g.is_numerical(graph, label)
    )
    if isinstance(fn, sums.TimesCount):  # an expanded SumAggregate: mean x count
        return _lower_sum(graph, label, fn, fst, snd, options)
    if fst == snd and not linear:  # f(x, x) reads one s-op: a Map
        node[nodes.FN], node[nodes.INPUTS] = Diagonal(fn), (fst,)
        return _lower_map(graph, label, options)
    if linear:  # exact, and no discretisation error even when fst == snd
        expr = node[nodes.EXPR]
        return numerical_mlp.linear_sequence_map_numerical_mlp(
            output_space(graph, fst),
            output_space(graph, snd),
            out_space,
            expr.fst_fac,
            expr.snd_fac,
            hidden_name=g.hidden_name(label),
        )
    return options.lookup(categorical_mlp.sequence_map_categorical_mlp(
        output_space(graph, fst),
        output_space(graph, snd),
        out_space,
        fn,
        options.one_space,
        hidden_name=g.hidden_name(label),
        pairs=node.get(nodes.TABLE_PAIRS),
    ))


def _leaf_qk(
    graph: nx.DiGraph, label: str, leaf: selectors.Leaf, bos: BasisDirection
) -> BilinearMap | FactoredBilinearMap:
    """One leaf's 0/1 predicate matrix; a standard comparison that fails on some value pair
    (`<` between a str and an int) is redone through `CheckedPredicate`, which names the pair.

    A leaf that selects pairs with a None side (`selectors.selects_none`, e.g. a negated Select)
    over s-ops that can be None scores those pairs 1 too (`categorical_attn.selects_absent_qk`:
    an empty one-hot is None)."""
    queries, keys = output_space(graph, leaf.queries), output_space(graph, leaf.keys)
    nullable = graph.nodes[leaf.queries][nodes.NULLABLE] or graph.nodes[leaf.keys][nodes.NULLABLE]
    predicate = leaf.predicate.predicate if isinstance(leaf.predicate, fold_maps.FoldedPredicate) else leaf.predicate
    if nullable and selectors.selects_none(predicate):  # (folded Maps never give None here)
        return categorical_attn.selects_absent_qk(queries, keys, leaf.predicate, ONE, bos)
    try:
        return categorical_attn.selector_qk(queries, keys, leaf.predicate)
    except CompilerError:
        raise
    except Exception:
        where = f"{label} (keys {leaf.keys}, queries {leaf.queries})"
        return categorical_attn.selector_qk(queries, keys, selectors.CheckedPredicate(where, leaf.predicate))


def _lower_sum(
    graph: nx.DiGraph, label: str, fn: sums.TimesCount, mean: str, count: str, options: LoweringOptions
) -> MLP:
    """The product MLP of a SumAggregate (`compiler.passes.sums`, `craft.chamber.counted_sum`)."""
    magnitudes = [abs(float(v)) for v in graph.nodes[mean][nodes.VALUE_SET]]
    return counted_sum.mean_times_count_mlp(
        output_space(graph, mean),
        output_space(graph, count),
        output_space(graph, label),
        fn.multiplier,
        bound=max(magnitudes, default=0.0) + 1.0,
        one_space=options.one_space,
        hidden_name=g.hidden_name(label),
    )


def _none_results(fn, inputs: tuple[str, ...]):
    """`fn` as "1 where it returns None" (None elsewhere: a table writes nothing there)."""
    if len(inputs) == 1:
        return lambda x: 1.0 if fn(x) is None else None
    return lambda x, y: 1.0 if fn(x, y) is None else None


def _gated(
    graph: nx.DiGraph, mlp: MLP, inputs: tuple[str, ...], flags: list[BasisDirection], options: LoweringOptions
) -> MLP:
    """`mlp` silenced where one of its inputs' none `flags` is set (`craft.chamber.definedness`)."""
    if options.bos in mlp.input_space:
        return definedness.gate_like_bos(mlp, options.bos, flags)
    if not flags:
        return mlp
    magnitude = {
        BasisDirection(i): max((abs(float(v)) for v in graph.nodes[i][nodes.VALUE_SET]), default=0.0)
        for i in inputs
        if g.is_numerical(graph, i)
    }
    return definedness.gate_by_bound(mlp, flags, magnitude)


def _with_none(graph: nx.DiGraph, label: str, mlp: MLP, options: LoweringOptions) -> MLP:
    """An elementwise node's MLP, carrying None (`craft.chamber.definedness`).

    Its hidden units are silenced where a numerical input is None; a numerical output that can
    be None gets its none flag: set where an input is None, or where a lookup table's function
    returns None.
    """
    fn, inputs = g.operation(graph, label)
    inputs = tuple(dict.fromkeys(inputs))
    flags = [g.none_direction(i) for i in inputs if g.has_none_flag(graph, i)]
    mlp = _gated(graph, mlp, inputs, flags, options)
    if not g.has_none_flag(graph, label):
        return mlp
    parts = [mlp]
    one_hots = [output_space(graph, i) for i in inputs if graph.nodes[i][nodes.NULLABLE] and not g.is_numerical(graph, i)]
    if one_hots or flags:
        parts.append(
            definedness.none_flag_mlp(
                one_hots, flags, g.none_direction(label), ONE, options.bos, hidden_name=f"{label}_none_hidden"
            )
        )
    if not any(g.is_numerical(graph, i) for i in inputs):  # a lookup table: f may return None
        flag_space = g.none_space(graph, label)
        spaces = [output_space(graph, i) for i in inputs]
        op = _none_results(fn if len(g.operation(graph, label)[1]) == len(inputs) else Diagonal(fn), inputs)
        if len(inputs) == 1:
            table = options.lookup(categorical_mlp.map_categorical_to_numerical_mlp(
                spaces[0], flag_space, op, hidden_name=f"{label}_none_table", one_space=options.one_space
            ))
        else:
            table = options.lookup(categorical_mlp.sequence_map_categorical_mlp(
                spaces[0], spaces[1], flag_space, op, options.one_space,
                hidden_name=f"{label}_none_table", pairs=graph.nodes[label].get(nodes.TABLE_PAIRS),
            ))
        if np.any(to_dense(table.second.matrix)):  # f returns None somewhere
            parts.append(table)
    else:  # a numerical Map: its measured flag MLP where f returns None, gated like its value MLP
        fit = fit_none_flag(graph, label, options.mlp_exactness, options.bos)
        if fit is not None:
            parts.append(_gated(graph, fit.mlp, inputs, flags, options))
    return MLP.combine_in_parallel(parts) if len(parts) > 1 else mlp


def direct_attention(
    graph: nx.DiGraph, selector: rasp.Selector, folds: dict | None = None, bos: BasisDirection | None = None
) -> tuple[BilinearMap | FactoredBilinearMap, int]:
    """The summed 0/1 predicate matrix of a selector's conjunction, and its number of leaves.

    `folds` (from `compiler.passes.optimize.fold_maps`) names Maps whose inputs the head reads instead.
    """
    leaves = selectors.conjunction(selector)
    if folds:
        leaves = fold_maps.fold_leaves(leaves, folds)
    bos = bos_direction() if bos is None else bos
    parts = [_leaf_qk(graph, selector.label, leaf, bos) for leaf in leaves]
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
    expr = graph.nodes[label][nodes.EXPR]
    folds = graph.nodes[label].get(nodes.FOLDED_MAPS, {})
    direct, n_terms = direct_attention(graph, expr.selector, folds, options.bos)
    out_space = output_space(graph, label)
    written = graph.nodes[label].get(nodes.FOLDED_OUTPUT)  # a Map of this head's output, folded in
    if expr.sop.label in folds or written is not None:
        inner, fn = expr.sop.label, None
        if expr.sop.label in folds:
            inner, fn = folds[expr.sop.label].inner, folds[expr.sop.label].fn
        if written is not None:
            fn = written.fn if fn is None else Composed(written.fn, fn)
        assert fn is not None  # a folded Map's function, a folded output's, or both
        value_map = fold_maps.value_map(output_space(graph, inner), out_space, fn, g.is_numerical(graph, label))
    elif g.is_numerical(graph, label):
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
    flag = g.none_space(graph, label)
    if flag.num_dims:  # a numerical mean that is None where nothing is selected: BOS sets the flag
        out_space = join_vector_spaces(out_space, flag)
        head = AttentionHead(head.w_qk, head.w_ov.on_spaces(head.w_ov.input_space, out_space), causal=head.causal)
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
    expr = graph.nodes[label][nodes.EXPR]
    if not needs_bos_default(graph, label):
        return None
    row = np.zeros(out_space.num_dims)
    if g.is_numerical(graph, label) and expr.default is None:
        if not g.has_none_flag(graph, label):
            return None  # value inference proved something is always selected
        row[out_space.index(g.none_direction(label))] = 1.0
    elif g.is_numerical(graph, label):
        row[out_space.index(BasisDirection(label))] = float(expr.default)
    elif BasisDirection(label, expr.default) not in out_space:
        # Value inference leaves the default out only where it proved the selector never empty
        # (per position, e.g. through a SelectorAnd that `needs_bos_default` cannot see into).
        return None
    else:
        row[out_space.index(BasisDirection(label, expr.default))] = 1.0
    return row


def needs_bos_default(graph: nx.DiGraph, label: str) -> bool:
    """Whether an Aggregate's default must be written by its head (BOS carries it)."""
    expr = graph.nodes[label][nodes.EXPR]
    if g.is_numerical(graph, label):
        if expr.default == 0:
            return False
    elif expr.default is None:
        return False
    try:
        leaves = selectors.conjunction(expr.selector)
        folds = graph.nodes[label].get(nodes.FOLDED_MAPS)
        if folds:  # the head reads the folded Maps' inputs, through composed predicates
            leaves = fold_maps.fold_leaves(leaves, folds)
        return not selectors.always_selects(graph, label, leaves)
    except Exception:
        return True  # unproven: write the default (a BOS row that is never used costs nothing)


def _lower_selector_width(
    graph: nx.DiGraph, label: str, options: LoweringOptions
) -> tuple[AttentionHead, MLP]:
    expr = graph.nodes[label][nodes.EXPR]
    direct, n_terms = direct_attention(graph, expr.selector, graph.nodes[label].get(nodes.FOLDED_MAPS), options.bos)
    return selector_width.selector_width(
        direct,
        n_terms,
        output_space(graph, label),
        options.max_seq_len,
        options.bos_space,
        options.one_space,
        categorical_output=not g.is_numerical(graph, label),
        causal=options.causal,
        coldness=options.coldness,
        hidden_name=g.hidden_name(label),
    )


def lower(graph: nx.DiGraph, options: LoweringOptions) -> None:
    """Give every s-op node its `OUTPUT_SPACE` and every computing node its `BLOCKS`."""
    for label in g.sop_nodes(graph):
        output_space(graph, label)
        kind = graph.nodes[label][nodes.KIND]
        if kind.embedded:
            blocks: tuple = ()
        elif kind is g.NodeKind.MAP:
            blocks = ((1, _with_none(graph, label, _lower_map(graph, label, options), options)),)
        elif kind in (g.NodeKind.SEQUENCE_MAP, g.NodeKind.LINEAR_SEQUENCE_MAP):
            blocks = ((1, _with_none(graph, label, _lower_sequence_map(graph, label, options), options)),)
        elif kind is g.NodeKind.AGGREGATE:
            blocks = ((0, _lower_aggregate(graph, label, options)),)
        elif kind is g.NodeKind.SELECTOR_WIDTH:
            head, mlp = _lower_selector_width(graph, label, options)
            blocks = ((0, head), (1, mlp))
        else:  # pragma: no cover - graph.expression_kind admits nothing else for s-ops
            raise AssertionError(kind)
        graph.nodes[label][nodes.BLOCKS] = blocks
