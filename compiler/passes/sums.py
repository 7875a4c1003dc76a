"""Express `SumAggregate` with a mean, a count and one product MLP, before tracing.

Softmax attention averages, so a sum over the selected keys is computed as

    mean  = numerical(Aggregate(selector, sop, default))       (one head)
    count = how many keys the selector picks at each query
    sum   = numerical(SequenceMap(TimesCount(...), mean, count))   (`craft.chamber.counted_sum`)

The count is `indices` itself when the selector compares only indices and never picks a later
key (a prefix selector such as `Select(indices, indices, LEQ)`): the count at query q is then
the fixed number of keys k <= q it picks, whatever the length, plain or causal. Otherwise the
count is `SelectorWidth(selector)` (a head and an MLP in parallel with the mean's head). Where
nothing is selected the mean head writes `default` and the multiplier is 1, so the result is the
default. A categorical `SumAggregate` becomes a categorical copy (a discretising Map) of the sum.

Cost: one attention sub-layer and one MLP sub-layer for a prefix sum; one more MLP sub-layer
(the width decoder, then the product) otherwise. Value inference gives the sum node the sums of
bags of the summed s-op's values (`compiler.passes.values.bag_sums`), not products of means.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from typing import cast

from compiler.errors import UnsupportedProgramError
from compiler.passes import selectors
from compiler.passes.discretise import as_selector, as_sop, rebuild, walk
from compiler.passes.outputs import Root, as_root
from craft.bases import INDICES_NAME
from rasp import rasp

MEAN_SUFFIX = "_mean"
COUNT_SUFFIX = "_count"
VALUE_SUFFIX = "_value"


@dataclasses.dataclass(frozen=True)
class TimesCount:
    """`mean * count`, the sum of `count` values whose mean is `mean` (count 0: the mean itself,
    which is then the default). With `by_index`, the count is looked up by the query's index."""

    by_index: tuple[int, ...] | None = None

    def multiplier(self, count: Hashable) -> int:
        """The factor for one value of the count s-op (a width, or an index with `by_index`)."""
        value = cast(int, count)  # a count s-op's values are widths or indices: ints
        width = self.by_index[value] if self.by_index is not None else value
        return width if width > 0 else 1

    def __call__(self, mean: float, count: Hashable) -> float:
        return mean * self.multiplier(count)


def prefix_counts(selector: rasp.Selector, max_seq_len: int) -> tuple[int, ...] | None:
    """Keys picked at each query index, when the selector compares indices only and never picks
    a later key (so the count does not depend on the length); None otherwise."""
    try:
        leaves = selectors.conjunction(selector)
    except UnsupportedProgramError:
        return None
    if len(leaves) != 1 or leaves[0].keys != INDICES_NAME or leaves[0].queries != INDICES_NAME:
        return None
    predicate = leaves[0].predicate
    counts = []
    try:
        for q in range(max_seq_len):
            if any(predicate(k, q) for k in range(q + 1, max_seq_len)):
                return None
            counts.append(sum(bool(predicate(k, q)) for k in range(q + 1)))
    except Exception:
        return None
    return tuple(counts)


def _expand(expr: rasp.SumAggregate, selector: rasp.Selector, sop: rasp.SOp, max_seq_len: int) -> rasp.SOp:
    label = expr.label
    mean = rasp.numerical(rasp.Aggregate(selector, sop, default=expr.default)).named(label + MEAN_SUFFIX)
    by_index = prefix_counts(selector, max_seq_len)
    if by_index is not None:
        count: rasp.SOp = rasp.indices
    else:
        count = rasp.categorical(rasp.SelectorWidth(selector)).named(label + COUNT_SUFFIX)
    total = rasp.SequenceMap(TimesCount(by_index), mean, count)
    if rasp.is_numerical(expr):
        return rasp.annotate(total, **dict(expr.annotations))
    total = rasp.numerical(total).named(label + VALUE_SUFFIX)
    return rasp.annotate(rasp.Map(_same, total, simplify=False), **dict(expr.annotations))


def _same(x: object) -> object:
    """The categorical copy's function (named, so it prints readably)."""
    return x


def is_sum(expr: rasp.RASPExpr) -> bool:
    """Whether `expr` is the product node of an expanded SumAggregate."""
    return isinstance(expr, rasp.SequenceMap) and isinstance(expr.f, TimesCount)


def expand_sums(program: Root, max_seq_len: int) -> Root:
    """`program` with every `SumAggregate` expressed as mean x count (module docstring).

    Returns `program` itself when it has none.
    """
    if not isinstance(program, rasp.RASPExpr):
        return program
    order = walk(program)
    if not any(isinstance(expr, rasp.SumAggregate) for expr in order):
        return program
    replaced: dict[int, rasp.RASPExpr] = {}

    def current(expr: rasp.RASPExpr) -> rasp.RASPExpr:
        return replaced.get(id(expr), expr)

    for expr in order:
        if isinstance(expr, rasp.SumAggregate):
            selector, sop = as_selector(current(expr.selector)), as_sop(current(expr.sop))
            replaced[id(expr)] = _expand(expr, selector, sop, max_seq_len)
        elif any(id(child) in replaced for child in expr.children):
            replaced[id(expr)] = rebuild(expr, current)
    return as_root(current(program))
