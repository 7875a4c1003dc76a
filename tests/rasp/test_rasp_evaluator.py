"""Evaluation semantics (docs/architecture.md): None, selection, aggregation, causal masking."""

import operator

import pytest

import rasp

EQ, LT, LEQ, TRUE = (rasp.Comparison.EQ, rasp.Comparison.LT, rasp.Comparison.LEQ,
                     rasp.Comparison.TRUE)


def _none_at_zero(sop):
    return rasp.Map(lambda x: None if x == 0 else x, sop)


def test_evaluate_and_call_agree():
    sop = rasp.tokens * 2
    assert rasp.evaluate(sop, [1, 2]) == sop([1, 2]) == [2, 4]
    assert rasp.rasp.evaluate(sop, (1, 2), causal=True) == [2, 4]


def test_empty_input():
    selector = rasp.Select(rasp.tokens, rasp.tokens, TRUE)
    assert rasp.Aggregate(selector, rasp.tokens)([]) == []
    assert rasp.SelectorWidth(selector)([]) == []
    assert selector([]) == []


def test_map_propagates_none_without_calling_f():
    calls = []
    sop = rasp.Map(lambda x: calls.append(x) or x, _none_at_zero(rasp.tokens), simplify=False)
    assert sop([0, 5]) == [None, 5]
    assert calls == [5]


def test_sequence_map_propagates_none_from_either_side():
    calls = []
    left = _none_at_zero(rasp.tokens)
    right = _none_at_zero(rasp.indices)
    sop = rasp.SequenceMap(lambda x, y: calls.append((x, y)) or x + y, left, right)
    assert sop([0, 3, 4]) == [None, 4, 6]
    assert calls == [(3, 1), (4, 2)]


def test_full_and_constant_sop():
    assert rasp.Full("z")("abc") == ["z", "z", "z"]
    assert rasp.ConstantSOp([1, 2, 3])("abc") == [1, 2, 3]
    assert rasp.ConstantSOp([1, 2], check_length=False)("abc") == [1, 2]


def test_select_is_query_by_key_and_predicate_gets_key_first():
    seen = []
    selector = rasp.Select(rasp.tokens, rasp.indices, lambda k, q: seen.append((k, q)) or k == "b")
    assert selector(["a", "b"]) == [[False, True], [False, True]]
    assert sorted(seen) == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    matrix = rasp.Select(rasp.tokens, rasp.tokens, LT)([1, 3, 2])
    # row q, column k, selected when key < query
    assert matrix == [[False, False, False], [True, False, True], [True, False, False]]


def test_select_never_calls_predicate_on_none():
    def strict(key, query):
        assert key is not None and query is not None
        return True

    keys = _none_at_zero(rasp.tokens)
    assert rasp.Select(keys, rasp.tokens, strict)([0, 1]) == [[False, True], [False, True]]
    assert rasp.Select(rasp.tokens, keys, EQ)([0, 1]) == [[False, False], [False, True]]


def test_constant_selector_and_combinations():
    constant = rasp.ConstantSelector([[True, False], [True, True]])
    assert constant("ab") == [[True, False], [True, True]]
    eye = rasp.Select(rasp.indices, rasp.indices, EQ)
    assert rasp.SelectorAnd(constant, eye)("ab") == [[True, False], [False, True]]
    assert rasp.SelectorOr(constant, rasp.SelectorNot(eye))("ab") == [[True, True], [True, True]]
    assert rasp.SelectorNot(constant)("ab") == [[False, True], [False, False]]
    loose = rasp.ConstantSelector([[True]], check_length=False)
    assert loose("abc") == [[True]]


def test_selector_width_counts_selected_keys():
    width = rasp.SelectorWidth(rasp.Select(rasp.tokens, rasp.tokens, LEQ))
    assert width([3, 1, 2]) == [3, 1, 2]
    assert all(isinstance(count, int) for count in width([3, 1, 2]))


def test_categorical_aggregate_returns_common_value_or_default():
    same = rasp.Select(rasp.tokens, rasp.tokens, EQ)
    assert rasp.Aggregate(same, rasp.tokens, default="none")("abca") == list("abca")
    nothing = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.FALSE)
    assert rasp.Aggregate(nothing, rasp.tokens, default="none")("ab") == ["none", "none"]
    assert rasp.Aggregate(nothing, rasp.tokens)("ab") == [None, None]
    constant = rasp.Full(7)
    everything = rasp.Select(rasp.tokens, rasp.tokens, TRUE)
    assert rasp.Aggregate(everything, constant)("abc") == [7, 7, 7]


def test_categorical_aggregate_rejects_different_numbers():
    everything = rasp.Select(rasp.tokens, rasp.tokens, TRUE)
    aggregate = rasp.Aggregate(everything, rasp.tokens).named("mixed")
    with pytest.raises(rasp.RaspEvaluationError, match="mixed"):
        aggregate([1, 2])


def test_numerical_aggregate_averages():
    prefix = rasp.Select(rasp.indices, rasp.indices, LEQ)
    mean = rasp.numerical(rasp.Aggregate(prefix, rasp.numerical(rasp.tokens), default=0))
    assert mean([2, 4, 0, 2]) == [2.0, 3.0, 2.0, 2.0]
    flags = rasp.numerical(rasp.tokens == "x")
    assert rasp.numerical(rasp.Aggregate(prefix, flags, default=0))("xyxy") == [1, 0.5, 2 / 3, 0.5]
    nothing = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.FALSE)
    assert rasp.numerical(rasp.Aggregate(nothing, rasp.tokens, default=0))([5, 6]) == [0, 0]


def test_causal_masks_every_selector():
    everything = rasp.Select(rasp.tokens, rasp.tokens, TRUE)
    assert everything("abc", causal=True) == [
        [True, False, False],
        [True, True, False],
        [True, True, True],
    ]
    negated = ~rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.FALSE)
    assert negated("abc", causal=True) == everything("abc", causal=True)
    constant = rasp.ConstantSelector([[True, True], [True, True]])
    assert constant("ab", causal=True) == [[True, False], [True, True]]
    assert rasp.SelectorWidth(everything)("abcd", causal=True) == [1, 2, 3, 4]
    prefix_sum = rasp.numerical(rasp.Aggregate(everything, rasp.numerical(rasp.tokens), default=0))
    assert prefix_sum([2, 4, 6], causal=True) == [2.0, 3.0, 4.0]
    later = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.GT)
    assert rasp.Aggregate(later, rasp.tokens, default="-")("ab", causal=True) == ["-", "-"]


def test_causal_flag_does_not_leak_between_evaluations():
    width = rasp.SelectorWidth(rasp.Select(rasp.tokens, rasp.tokens, TRUE))
    assert width("abc", causal=True) == [1, 2, 3]
    assert width("abc") == [3, 3, 3]


def test_each_subexpression_evaluated_once():
    calls = []
    shared = rasp.Map(lambda x: calls.append(x) or x, rasp.tokens)
    program = rasp.SequenceMap(operator.add, shared, shared)
    program = rasp.SequenceMap(operator.add, program, shared)
    assert program([1, 2]) == [3, 6]
    assert calls == [1, 2]


def test_deep_program_does_not_hit_recursion_limit():
    sop = rasp.tokens
    for _ in range(3000):
        sop = rasp.Map(lambda x: x + 1, sop, simplify=False)
    assert sop([0, 1]) == [3000, 3001]


def test_subclass_of_known_type_uses_parent_rule():
    class Doubling(rasp.Map):
        def __init__(self, inner):
            super().__init__(lambda x: 2 * x, inner)

    assert Doubling(rasp.tokens)([1, 2]) == [2, 4]
