"""Memory estimates made before any weight matrix is built, and the refusal they drive.

Every construction's matrices have shapes fixed by the value-set sizes that value inference
computed: a categorical s-op owns one residual direction per value, a numerical one a single
direction, and each block's matrices connect those spaces and its hidden units. So what a
compile will allocate is known before lowering allocates anything. Without this check a
too-large compile (a 100,000-token vocabulary through a `Select`, or `length` at
max_seq_len 10,000) ran for minutes and then died allocating tens of GiB.

What is counted, in bytes, is what the passes hold:

| part | size |
|---|---|
| embeddings (`compiler.passes.layout`) | dense float32 `(vocab + 2 + N + 1) x D` |
| unembedding (an identity on the output directions, built sparse) | 12 bytes per output direction |
| a block of at most `craft.maps.SPARSE_ABOVE` entries | dense float64, all its entries |
| a larger block (built sparse by the chamber) | 12 bytes per stored non-zero (value and index), bounded by `compiler.passes.validate.block_cost` |
| SelectorWidth's decoder MLP (always dense) | float64 `(2 N + 2) x (|out| + 1)` |

with `N` = max_seq_len, `D` the residual width and `|x|` the values of a categorical s-op (1
for a numerical one). A block's entries: categorical Map `x -> y`: `|x| (|x| + |y|)`;
SequenceMap: `(|x| + |y| + 1) P + P |z|` for the `P` value pairs kept; numerical Map: `H (3 +
|y|)` with `H` the hidden units of validation's fit (else two per input value); Aggregate /
SelectorWidth: `(|queries| + 1)(|keys| + 1)` per selector leaf, plus the value map. Under a norm
(`compile_rasp(..., norm=...)`) every lookup of categorical inputs is saturated, two hidden units
for each one (`craft.chamber.categorical_mlp.saturated`), so its entries count twice.

Measured against tracemalloc's peak over a whole compile, the estimate is 0.4x to 1.3x of it on
the large cases (hist with 5,000 tokens 0.9x, length at max_seq_len 3,000 0.4x, sort at 100/100
0.4x): the later passes hold a copy or two of the blocks while merging and assembling them. It
is a guard against compiles that cannot fit, not a prediction of the peak.
"""

from __future__ import annotations

import dataclasses
import warnings

import networkx as nx

from compiler.errors import ModelSizeError, ModelSizeWarning, UnsupportedProgramError
from compiler.passes import graph as g
from compiler.passes import nodes, selectors
from compiler.passes.optimize import fold_maps
from compiler.passes.validate import block_cost
from craft.maps import SPARSE_ABOVE

EMBEDDING_BYTES = 4  # float32 embeddings (the layout)
DENSE_BYTES = 8  # float64 blocks (the chamber)
SPARSE_BYTES = 12  # a stored non-zero of a sparse block: float64 value and int32 index
# `compile_rasp`'s default bound on the estimate.
DEFAULT_MAX_WEIGHT_BYTES = 1 << 30
# A compile within the bound but above this fraction of it gets a `ModelSizeWarning`.
WARN_FRACTION = 0.25


@dataclasses.dataclass(frozen=True)
class SizeEstimate:
    """Bytes a compile will hold for its weights, per s-op and in total, before building them.

    `per_sop` maps each computing s-op's label to the bytes of its blocks; `embedding` covers
    the token and position embeddings and the unembedding over `residual_width` directions.
    """

    per_sop: dict[str, int]
    embedding: int
    residual_width: int

    @property
    def total(self) -> int:
        return self.embedding + sum(self.per_sop.values())

    @property
    def largest(self) -> tuple[str, int]:
        """`(label, bytes)` of the s-op with the biggest blocks (`("", 0)` when none computes)."""
        return max(self.per_sop.items(), key=lambda item: item[1], default=("", 0))


def _dims(graph: nx.DiGraph, label: str) -> int:
    """Residual directions of an s-op: one per value (categorical) or one (numerical)."""
    return 1 if g.is_numerical(graph, label) else len(graph.nodes[label][nodes.VALUE_SET])


def _selector_entries(graph: nx.DiGraph, label: str) -> int:
    """Entries of the summed W_QK: `(|queries| + 1) x (|keys| + 1)` per selector leaf."""
    node = graph.nodes[label]
    try:
        leaves = selectors.conjunction(node[nodes.EXPR].selector)
    except UnsupportedProgramError:  # validation reports it; nothing to build
        return 0
    folds = node.get(nodes.FOLDED_MAPS)
    if folds:
        leaves = fold_maps.fold_leaves(leaves, folds)
    return sum((_dims(graph, leaf.queries) + 1) * (_dims(graph, leaf.keys) + 1) for leaf in leaves)


def _block_entries(graph: nx.DiGraph, label: str, max_seq_len: int) -> tuple[int, int]:
    """`(entries of the block's matrices built whole, entries of those always built dense)`."""
    node = graph.nodes[label]
    kind = node[nodes.KIND]
    if kind.embedded:
        return 0, 0
    out = _dims(graph, label)
    if kind.elementwise:
        _, inputs = g.operation(graph, label)
        inputs = tuple(dict.fromkeys(inputs))  # f(x, x) reads one s-op
        if len(inputs) == 1:
            (inner,) = inputs
            if g.is_numerical(graph, inner):
                fit = graph.graph.get(nodes.NUMERICAL_FITS, {}).get(label)  # measured by validation
                hidden = (
                    fit.mlp.first.output_space.num_dims
                    if fit is not None
                    else 2 * len(graph.nodes[inner][nodes.VALUE_SET]) + 2
                )
                return hidden * (3 + out), 0
            size = _dims(graph, inner)
            return size * (size + out), 0
        fst, snd = inputs
        if kind is g.NodeKind.LINEAR_SEQUENCE_MAP and g.is_numerical(graph, label):
            return 4 * (_dims(graph, fst) + _dims(graph, snd) + out), 0
        pairs = node.get(nodes.TABLE_PAIRS)
        kept = len(pairs) if pairs is not None else _dims(graph, fst) * _dims(graph, snd)
        return (_dims(graph, fst) + _dims(graph, snd) + 1 + out) * kept, 0
    qk = _selector_entries(graph, label)
    if kind is g.NodeKind.AGGREGATE:
        written = node.get(nodes.FOLDED_MAPS, {}).get(node[nodes.EXPR].sop.label)
        read = written.inner if written is not None else node[nodes.EXPR].sop.label
        return qk + (_dims(graph, read) + 1) * (out + 1), 0
    # SelectorWidth: the head, then a dense decoder MLP with two ramps per possible width.
    return qk, (2 * max_seq_len + 2) * (out + 4)


def _is_lookup(graph: nx.DiGraph, label: str) -> bool:
    """Whether the s-op is computed by a lookup of categorical inputs (a table MLP)."""
    kind = graph.nodes[label][nodes.KIND]
    if not kind.elementwise or kind.embedded:
        return False
    _, inputs = g.operation(graph, label)
    return not any(g.is_numerical(graph, inner) for inner in inputs)


def _block_bytes(graph: nx.DiGraph, label: str, max_seq_len: int, saturated: bool) -> int:
    whole, dense = _block_entries(graph, label, max_seq_len)
    if whole > SPARSE_ABOVE:  # the chamber builds it sparse: count what it stores
        stored = block_cost(graph, label).nonzeros * SPARSE_BYTES
    else:
        stored = whole * DENSE_BYTES
    if saturated and _is_lookup(graph, label):  # two hidden units for each one
        stored *= 2
    return stored + dense * DENSE_BYTES


def estimate_weight_bytes(graph: nx.DiGraph, vocab_size: int, max_seq_len: int, *, saturated: bool = False) -> SizeEstimate:
    """Estimate the bytes the compile will hold, from the value sets on `graph` (module doc).

    Args:
      graph: the traced graph after value inference, fusion and optimisation (as lowered).
      vocab_size: the number of vocabulary tokens (BOS and PAD are added here).
      max_seq_len: the longest input the model is compiled for.
      saturated: whether categorical lookups are saturated (a compile with a norm).

    Returns:
      The `SizeEstimate`; nothing is allocated beyond a few integers per node.
    """
    width = 2  # the `one` and BOS directions
    per_sop = {}
    for label in g.sop_nodes(graph):
        width += _dims(graph, label)
        if graph.nodes[label][nodes.KIND] is g.NodeKind.SELECTOR_WIDTH:
            width += 1  # its scratch direction
        size = _block_bytes(graph, label, max_seq_len, saturated)
        if size:
            per_sop[label] = size
    outputs = sum(_dims(graph, sink) for sink in graph.graph.get(nodes.SINKS, (graph.graph[nodes.SINK],)))
    embedding = (vocab_size + 2 + max_seq_len + 1) * width * EMBEDDING_BYTES + outputs * SPARSE_BYTES
    return SizeEstimate(per_sop=per_sop, embedding=embedding, residual_width=width)


def _size(n: int) -> str:
    """Bytes in the largest binary unit that keeps the number at least 1 (`1.5 GiB`)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def check_size(estimate: SizeEstimate, limit: int | None) -> None:
    """Refuse an estimate above `limit` bytes; warn when it is a quarter of it or more.

    Args:
      estimate: from `estimate_weight_bytes`.
      limit: the bound in bytes; `None` checks nothing.

    Raises:
      ModelSizeError: naming the largest s-op, its size, the embeddings' size, the total and
        the limit, and what to change (vocabulary, max_seq_len, value sets, or the limit).
    """
    if limit is None:
        return
    label, part = estimate.largest
    total = estimate.total
    parts = (f"the largest s-op is {label!r} with {_size(part)}; " if label else "") + (
        f"the embeddings over {estimate.residual_width} residual directions take {_size(estimate.embedding)}"
    )
    if total > limit:
        raise ModelSizeError(
            f"the compiled model would hold about {_size(total)} of weight matrices while compiling, more "
            f"than max_weight_bytes={limit} ({_size(limit)}): {parts}. Nothing was built. Use a "
            "smaller vocabulary or max_seq_len, give the large s-ops fewer values (e.g. a Map "
            "that buckets them), or, if the machine has the memory, raise max_weight_bytes "
            "(tracr-compile --max-weight-bytes; None disables the check)",
            label=label,
            estimated_bytes=total,
            limit=limit,
        )
    if total >= WARN_FRACTION * limit:
        warnings.warn(
            f"the compiled model will hold about {_size(total)} of weight matrices while compiling ("
            f"max_weight_bytes {_size(limit)}): {parts}; the compile may hold a few times "
            "that at its peak",
            ModelSizeWarning,
            stacklevel=3,
        )


__all__ = [
    "DEFAULT_MAX_WEIGHT_BYTES",
    "SizeEstimate",
    "check_size",
    "estimate_weight_bytes",
]
