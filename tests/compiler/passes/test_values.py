"""`compiler.passes.values`: the value set and nullability of each kind of s-op."""

from __future__ import annotations

import pytest

from compiler.errors import ValueInferenceError
from compiler.passes import graph as g
from compiler.passes import nodes
from compiler.passes.values import bag_means, infer_values
from rasp import rasp


def _values(program, vocab=(1, 2, 3), max_seq_len=3):
    graph = g.trace(program)
    infer_values(graph, vocab, max_seq_len)
    return graph


def test_map_applies_its_function_to_every_input_value():
    square = rasp.Map(lambda x: x * x, rasp.tokens).named("square")
    graph = _values(square)
    assert graph.nodes["tokens"][nodes.VALUE_SET] == {1, 2, 3}
    assert graph.nodes["square"][nodes.VALUE_SET] == {1, 4, 9}
    assert graph.nodes["square"][nodes.NULLABLE] is False
    assert "indices" not in graph


def test_a_map_returning_none_is_nullable_and_none_is_no_value():
    odd = rasp.Map(lambda x: x if x % 2 else None, rasp.tokens).named("odd")
    graph = _values(odd)
    assert graph.nodes["odd"][nodes.VALUE_SET] == {1, 3}
    assert graph.nodes["odd"][nodes.NULLABLE] is True


def test_sequence_map_combines_every_pair_and_only_the_diagonal_of_one_sop():
    pairs = rasp.SequenceMap(lambda a, b: a - b, rasp.tokens, rasp.indices).named("pairs")
    graph = _values(pairs)
    assert graph.nodes["pairs"][nodes.VALUE_SET] == {-1, 0, 1, 2, 3}  # {1,2,3} - {0,1,2}
    twice = rasp.SequenceMap(lambda a, b: a * b, rasp.tokens, rasp.tokens).named("twice")
    assert _values(twice).nodes["twice"][nodes.VALUE_SET] == {1, 4, 9}  # not 2, 3 or 6


def test_categorical_aggregate_takes_its_sops_values_and_the_default():
    select = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT).named("before")
    previous = rasp.Aggregate(select, rasp.tokens, default=0).named("previous")
    graph = _values(previous)
    assert graph.nodes["previous"][nodes.VALUE_SET] == {0, 1, 2, 3}
    assert graph.nodes["previous"][nodes.NULLABLE] is False
    no_default = rasp.Aggregate(select, rasp.tokens).named("none")
    assert _values(no_default).nodes["none"][nodes.NULLABLE] is True


def test_numerical_aggregate_takes_every_mean_of_a_bag():
    ones = rasp.numerical(rasp.Map(lambda x: 1 if x == 1 else 0, rasp.tokens)).named("ones")
    prefix = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ).named("prefix")
    frac = rasp.numerical(rasp.Aggregate(prefix, ones, default=0)).named("frac")
    graph = _values(frac)
    assert graph.nodes["frac"][nodes.VALUE_SET] == {0.0, 1.0, 0.5, 1 / 3, 2 / 3}
    assert bag_means(frac, frozenset({0, 1}), 3) == {0.0, 1.0, 0.5, 1 / 3, 2 / 3}


def test_selector_width_counts_zero_to_max_seq_len():
    select = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ).named("same")
    width = rasp.SelectorWidth(select).named("width")
    graph = _values(width, max_seq_len=4)
    assert graph.nodes["width"][nodes.VALUE_SET] == {0, 1, 2, 3, 4}
    assert graph.nodes["width"][nodes.NULLABLE] is False


def test_a_function_raising_on_a_reachable_value_is_named():
    inverse = rasp.Map(lambda x: 1 / (x - 2), rasp.tokens).named("inverse")
    with pytest.raises(ValueInferenceError, match=r"inverse: its function raised ZeroDivisionError.*\(2\)"):
        _values(inverse)
