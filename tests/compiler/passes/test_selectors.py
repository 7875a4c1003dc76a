"""`compiler.passes.selectors`: selectors as conjunctions of printable leaf predicates."""

from __future__ import annotations

import pytest

from compiler.errors import UnsupportedProgramError
from compiler.passes import graph as g
from compiler.passes import selectors
from compiler.passes.values import infer_values
from rasp import rasp
from rasp.comparison import PredicateAnd, PredicateNot, PredicateOr

LT = rasp.Comparison.LT
EQ = rasp.Comparison.EQ


def _matrix(leaf: selectors.Leaf, values=range(3)) -> list[list[bool]]:
    """`[query][key]` selection of a leaf over small integer values."""
    return [[bool(leaf.predicate(k, q)) for k in values] for q in values]


def test_a_select_is_one_leaf_with_its_comparison():
    (leaf,) = selectors.conjunction(rasp.Select(rasp.tokens, rasp.indices, LT))
    assert (leaf.keys, leaf.queries, leaf.predicate, leaf.negated) == ("tokens", "indices", LT, False)


def test_and_keeps_leaves_over_different_sops_and_merges_shared_ones():
    by_token = rasp.Select(rasp.tokens, rasp.tokens, EQ)
    before = rasp.Select(rasp.indices, rasp.indices, LT)
    not_after = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ)
    leaves = selectors.conjunction(by_token & before & not_after)
    assert [(leaf.keys, leaf.queries) for leaf in leaves] == [("indices", "indices"), ("tokens", "tokens")]
    merged = leaves[0]
    assert merged.predicate == PredicateAnd(LT, rasp.Comparison.LEQ)
    assert _matrix(merged) == [[False] * 3, [True, False, False], [True, True, False]]


def test_not_is_pushed_into_the_leaf():
    (leaf,) = selectors.conjunction(~rasp.Select(rasp.indices, rasp.indices, LT))
    assert leaf.negated and leaf.predicate == PredicateNot(LT)
    assert _matrix(leaf) == [[True] * 3, [False, True, True], [False, False, True]]


def test_or_over_the_same_sops_is_one_leaf_and_over_different_ones_is_refused():
    before = rasp.Select(rasp.indices, rasp.indices, LT)
    same = rasp.Select(rasp.indices, rasp.indices, EQ)
    (leaf,) = selectors.conjunction(rasp.SelectorOr(before, same))  # `|` would fuse the Selects
    assert leaf.predicate == PredicateOr(LT, EQ)
    assert _matrix(leaf) == [[True, False, False], [True, True, False], [True, True, True]]
    with pytest.raises(UnsupportedProgramError, match="no exact single-head construction"):
        selectors.conjunction(before | rasp.Select(rasp.tokens, rasp.tokens, EQ))


def test_constant_selector_is_a_pattern_over_positions():
    (leaf,) = selectors.conjunction(rasp.ConstantSelector([[1, 0], [1, 1]]))
    assert (leaf.keys, leaf.queries) == ("indices", "indices")
    assert leaf.predicate == selectors.ConstantPattern(((True, False), (True, True)))
    assert _matrix(leaf) == [[True, False, False], [True, True, False], [False, False, False]]


def test_predicates_print_readably():
    before = rasp.Select(rasp.indices, rasp.indices, LT)
    same = rasp.Select(rasp.indices, rasp.indices, EQ)
    (leaf,) = selectors.conjunction(rasp.SelectorNot(rasp.SelectorAnd(before, same)))
    assert leaf.predicate == PredicateOr(PredicateNot(LT), PredicateNot(EQ))
    assert repr(leaf.predicate).startswith("PredicateOr(fst=PredicateNot(inner=<Comparison.LT")


def _graph(program, vocab=(1, 2, 3), max_seq_len=3):
    graph = g.trace(program)
    infer_values(graph, vocab, max_seq_len)
    return graph


def test_always_selects_and_reads_later_positions():
    prefix = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ)
    strictly_before = rasp.Select(rasp.indices, rasp.indices, LT)
    everything = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE)
    program = rasp.SequenceMap(
        lambda a, b: (a, b),
        rasp.Aggregate(prefix & strictly_before, rasp.tokens).named("a"),
        rasp.Aggregate(everything, rasp.tokens).named("b"),
    )
    graph = _graph(program)
    assert selectors.always_selects(graph, "x", selectors.conjunction(prefix)) is True
    assert selectors.always_selects(graph, "x", selectors.conjunction(strictly_before)) is False
    assert selectors.always_selects(graph, "x", selectors.conjunction(everything)) is True
    assert selectors.reads_later_positions(graph, "x", selectors.conjunction(prefix)) is False
    assert selectors.reads_later_positions(graph, "x", selectors.conjunction(everything)) is True
