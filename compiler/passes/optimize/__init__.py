"""Optimisation passes between elementwise fusion and lowering.

Each pass is a pure function `graph -> graph` over the traced graph with inferred values; the
lowering reads what a pass recorded on the nodes. `compile_rasp(..., optimize=...)` picks them:

- `True` (the default): every pass in `PASSES`, in that order;
- `False` or `()`: none, the literal one-block-per-s-op layout (Tracr's);
- an iterable of pass names: those passes, in `PASSES` order.

Passes:

- `merge_common`: two expressions computing the same operation of the same inputs become one
  (run on the RASP program before tracing), see `compiler.passes.optimize.merge_common`;
- `fold_maps`: a Map over a categorical s-op that only attention heads read is folded into their
  `W_QK` (as keys or queries) and `W_OV` (as values), see `compiler.passes.optimize.fold_maps`;
- `fold_outputs`: a Map of a categorical Aggregate's output, when nothing else reads the
  Aggregate, is written by the head itself (`W_OV` sends each value to `f(value)`), see
  `compiler.passes.optimize.fold_outputs`;
- `fuse_inputs`: a categorical Map read only by one SequenceMap becomes part of that
  SequenceMap's lookup MLP, see `compiler.passes.optimize.fuse_inputs`;
- `prune_tables`: a two-input lookup table keeps only the rows (value pairs) that can meet at one
  position, from per-position value sets (`length - indices` only sees `length > index`), see
  `compiler.passes.optimize.prune_tables`;
- `prune_values`: value sets recomputed on the optimised graph, so directions an s-op can never
  take (off the diagonal of a SequenceMap that now reads one s-op twice, values only pruned table
  rows produce) are dropped, see `compiler.passes.optimize.prune_values`;
- `narrow_lookups`: at lowering, a categorical Map's lookup MLP gets one hidden unit per output
  value (reading the inputs sent to it, or the complement of them when the input is never None)
  instead of one per input value, wherever that has fewer non-zero weights
  (`craft.chamber.categorical_mlp`); such a unit sums several reads, which a compressed stream
  makes noisier, so compile without it for compression with a guarantee at the smallest width;
- `factor_qk`: at assembly, `W_QK` is factored per connected component, order comparisons as a
  dyadic cover with `O(m log m)` instead of `O(m^2)` non-zeros (`compiler.passes.qk_factor`); without
  it a head's `W_QK` is factored as `I, W_QKᵀ` or `W_QK, I`.

Every applied change is listed, one line each, in `graph.graph[nodes.APPLIED]` (shown by the
model summary).

Modules: `pipeline` (the pass list and the drivers re-exported here), then one module per pass
in pipeline order (`merge_common`, `fold_maps`, `fold_outputs`, `fuse_inputs`, `prune_tables`,
`prune_values`; `narrow_lookups` is a choice in `craft.chamber.categorical_mlp`, `factor_qk` lives in
`compiler.passes.qk_factor`), and `describe` (what a pass
recorded on a node, in words).
"""
from compiler.passes.optimize.pipeline import (
    FACTOR_QK,
    NARROW_LOOKUPS,
    PASSES,
    applied,
    optimize_graph,
    optimize_program,
    record,
    selected_passes,
)

__all__ = [
    "FACTOR_QK",
    "NARROW_LOOKUPS",
    "PASSES",
    "applied",
    "optimize_graph",
    "optimize_program",
    "record",
    "selected_passes",
]
