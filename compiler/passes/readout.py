"""Read a numerical output that can be None through a categorical copy.

A numerical s-op that can be None carries a none flag (`craft.chamber.definedness`), but a
compiled model's numerical output is one number per position, which has no room for "None".
Such an output is therefore read out one-hot: the program's output becomes
`categorical(Map(identity, x))` under the output's label (the number itself is relabelled
`<label>_number`), one logit per value x takes and none where x is None, so the decoded output
equals the evaluator's, `None` included. It costs one discretising MLP over x's value set and
one output column per value instead of one. The rewrite needs value inference (only then is it
known that the output can be None), so `trace_values` traces and infers twice when it applies.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import networkx as nx

from compiler.passes import graph as g
from compiler.passes import nodes
from compiler.passes.discretise import as_sop, copy_value
from compiler.passes.joint_selectors import fill_absent
from compiler.passes.outputs import Outputs, Root, programs_of
from compiler.passes.rounding import merge_rounding_twins
from compiler.passes.values import infer_values
from rasp import rasp

NUMBER_SUFFIX = "_number"


def none_readouts(program: Root, graph: nx.DiGraph) -> Root:
    """`program` whose numerical outputs that can be None are read out categorically; `program`
    itself when there is none. `graph` is its traced graph with inferred values."""
    outputs = programs_of(program)
    sinks = graph.graph[nodes.SINKS]
    if not any(g.has_none_flag(graph, label) for label in sinks):
        return program
    rewritten: list[rasp.SOp] = []
    for expr, label in zip(outputs, sinks):
        output = as_sop(expr)  # the outputs of a traced program are s-ops (`g.trace` checks)
        if g.has_none_flag(graph, label):
            number = rasp.annotate(output, name=label + NUMBER_SUFFIX)
            output = rasp.categorical(rasp.Map(copy_value, number, simplify=False)).named(label)
        rewritten.append(output)
    return Outputs(tuple(rewritten)) if isinstance(program, Outputs) else rewritten[0]


def trace_values(program: Root, vocab: Iterable[Any], max_seq_len: int) -> nx.DiGraph:
    """`g.trace` and `infer_values` of `program`, after `joint_selectors.fill_absent`,
    `none_readouts` and `rounding.merge_rounding_twins` (each needs the inferred values, so a
    rewrite is traced and inferred again)."""
    vocab = tuple(vocab)
    graph = g.trace(program)
    infer_values(graph, vocab, max_seq_len)
    for rewrite in (fill_absent, none_readouts, _merge_twins):
        rewritten = rewrite(program, graph)
        if rewritten is not program:
            program = rewritten
            graph = g.trace(program)
            infer_values(graph, vocab, max_seq_len)
    return graph


def _merge_twins(program: Root, graph: nx.DiGraph) -> Root:
    return merge_rounding_twins(program, graph, (copy_value,))
