"""`compiler.passes.discretise`: categorical copies where a numerical s-op is read as a one-hot."""

from __future__ import annotations

from compiler.passes.discretise import CATEGORICAL_SUFFIX, discretise_numerical_inputs
from rasp import rasp


def _numbers():
    return rasp.numerical(rasp.Map(lambda x: x / 2, rasp.tokens)).named("half")


def test_a_sequence_map_reads_a_categorical_copy_of_its_numerical_input():
    half = _numbers()
    pairs = rasp.SequenceMap(lambda a, b: a + b, half, rasp.indices).named("pairs")
    rewritten = discretise_numerical_inputs(pairs)
    assert rewritten is not pairs and rewritten.label == "pairs"
    copy = rewritten.fst
    assert copy.label == "half" + CATEGORICAL_SUFFIX and rasp.is_categorical(copy)
    assert isinstance(copy, rasp.Map) and copy.inner is half and copy.f(1.5) == 1.5
    assert rewritten.snd is rasp.indices
    assert rewritten([1, 2]) == pairs([1, 2]) == [0.5, 2.0]


def test_select_keys_and_categorical_aggregates_get_copies_and_share_one():
    half = _numbers()
    select = rasp.Select(half, half, rasp.Comparison.EQ).named("same")
    mode = rasp.Aggregate(select, half).named("mode")  # categorical Aggregate of a numerical s-op
    rewritten = discretise_numerical_inputs(mode)
    copy = rewritten.sop
    assert copy.label == "half_categorical"
    assert rewritten.selector.keys is copy and rewritten.selector.queries is copy
    assert rewritten([2, 2]) == mode([2, 2]) == [1.0, 1.0]


def test_programs_without_numerical_one_hot_reads_are_returned_unchanged():
    half = _numbers()
    linear = rasp.numerical(rasp.LinearSequenceMap(half, half, 1, 1)).named("sum")
    assert discretise_numerical_inputs(linear) is linear
    mean = rasp.numerical(rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ), half))
    assert discretise_numerical_inputs(mean) is mean


def test_a_taken_copy_label_gets_an_underscore():
    half = _numbers()
    taken = rasp.Map(lambda x: x, rasp.tokens).named("half_categorical")
    pairs = rasp.SequenceMap(lambda a, b: (a, b), half, taken).named("pairs")
    rewritten = discretise_numerical_inputs(pairs)
    assert rewritten.fst.label == "half_categorical_" and rewritten.snd is taken
