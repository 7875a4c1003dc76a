"""Names of the attributes passes keep on the graph and its nodes: the one place they are defined.

Every pass reads and writes plain networkx attributes; these constants are their keys, so a key
is spelled once and every module that touches an attribute imports it from here (Tracr keeps its
node keys the same way). Node kinds are `compiler.passes.graph.NodeKind`.
"""

from __future__ import annotations

# --- Node attributes -------------------------------------------------------------------------
# Set by tracing (`compiler.passes.graph.trace`).
EXPR = "expr"  # the RASP expression
KIND = "kind"  # its `NodeKind`
NAME = "name"  # the user's label (node keys get a suffix where two expressions share it)
# Set by value inference (`compiler.passes.values`).
VALUE_SET = "value_set"  # the values the s-op can take (without None)
NULLABLE = "nullable"  # whether it can be None
BY_POSITION = "by_position"  # value sets per position, where they differ (`positional`)
VARIANTS = "variants"  # {value: its variants}: values it takes with several Python types (`variants`)
# Set by fusion (`compiler.passes.fuse`, `compiler.passes.optimize`): the node's function, the
# labels it reads, and the labels of the nodes it absorbed.
FN = "fn"
INPUTS = "inputs"
FUSED = "fused"
# Set by optimisation passes.
FOLDED_MAPS = "folded_maps"  # attention node: {map label: FoldedMap} (`optimize.fold_maps`)
FOLDED_OUTPUT = "folded_output"  # attention node: the Map its W_OV writes (`optimize.fold_outputs`)
TABLE_PAIRS = "table_pairs"  # two-input lookup: the input pairs kept (`optimize.prune_tables`)
# Set by validation / lowering.
NUMERICAL_FIT = "numerical_fit"  # numerical -> numerical Map: its `NumericalMapFit`
OUTPUT_SPACE = "output_space"  # the residual subspace the node writes
BLOCKS = "blocks"  # its Craft blocks
LAYER = "layer"  # the sub-layer it was placed in (`compiler.passes.allocate`)

# --- Graph attributes ------------------------------------------------------------------------
SINK = "sink"  # the program's output label (the first program's, when several are compiled)
SINKS = "sinks"  # every output label, in program order (one per program)
SOURCES = "sources"  # the embedded inputs present (tokens, indices)
USES_LENGTH = "uses_length"  # the program reads rasp.length
NUMERICAL_FITS = "numerical_fits"  # {label: NumericalMapFit} measured by validation, reused by lowering
CAUSAL_NOTES = "causal_notes"  # selectors whose result the causal mask can change
APPLIED = "optimizations"  # one line per optimisation applied, for summaries
LOOP = "loop"  # a compiled rasp.Loop's record (`compiler.compiling_loops.LoopRecord`)
