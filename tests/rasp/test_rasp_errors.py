"""Every evaluation error names the expression label and the offending value."""

import pytest

import rasp


def _raises(expr, xs, *fragments, causal=False):
    with pytest.raises(rasp.RaspEvaluationError) as info:
        rasp.evaluate(expr, xs, causal=causal)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)
    return info.value


def test_error_class_is_exported_from_both_modules():
    assert rasp.RaspEvaluationError is rasp.rasp.RaspEvaluationError
    assert issubclass(rasp.RaspEvaluationError, Exception)


def test_map_function_raising_is_wrapped_and_chained():
    sop = rasp.Map(lambda x: 1 / x, rasp.tokens).named("inverse")
    error = _raises(sop, [1, 0], "inverse", "0", "ZeroDivisionError")
    assert isinstance(error.__cause__, ZeroDivisionError)


def test_sequence_map_function_raising_names_both_values():
    sop = rasp.SequenceMap(lambda x, y: x / y, rasp.tokens, rasp.indices).named("ratio")
    error = _raises(sop, [5, 6], "ratio", "(5, 0)")
    assert isinstance(error.__cause__, ZeroDivisionError)


def test_linear_sequence_map_error_names_label():
    sop = rasp.LinearSequenceMap(rasp.tokens, rasp.indices, 1, 1).named("lin")
    _raises(sop, ["a"], "lin", "'a'")


def test_predicate_raising_names_selector_key_and_query():
    selector = rasp.Select(rasp.tokens, rasp.indices, rasp.Comparison.LT).named("cmp")
    error = _raises(selector, ["a"], "cmp", "'a'", "query 0")
    assert isinstance(error.__cause__, TypeError)


def test_predicate_error_surfaces_through_downstream_aggregate():
    selector = rasp.Select(rasp.tokens, rasp.tokens, lambda k, q: k.missing).named("broken")
    _raises(rasp.Aggregate(selector, rasp.tokens), "ab", "broken", "AttributeError")


def test_constant_sop_length_mismatch():
    sop = rasp.ConstantSOp([1, 2]).named("pair")
    _raises(sop, "abc", "pair", "[1, 2]", "length 3")


@pytest.mark.parametrize("value", [[[True, False]], [[True], [False]], []])
def test_constant_selector_shape_mismatch(value):
    selector = rasp.ConstantSelector(value).named("fixed")
    _raises(selector, "ab", "fixed", "length 2")


def test_constant_selector_ragged_rows():
    selector = rasp.ConstantSelector([[True], [True, False]], check_length=False).named("ragged")
    _raises(selector, "ab", "ragged", "[1, 2]")


def test_categorical_aggregate_different_values():
    everything = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE)
    aggregate = rasp.Aggregate(everything, rasp.tokens).named("ambiguous")
    _raises(aggregate, "ab", "ambiguous", "'a'", "'b'")


def test_categorical_aggregate_value_and_none_differ():
    everything = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE)
    values = rasp.Map(lambda x: None if x == "a" else x, rasp.tokens)
    _raises(rasp.Aggregate(everything, values).named("holes"), "ab", "holes", "None")


def test_numerical_aggregate_non_numeric_value():
    everything = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE)
    aggregate = rasp.numerical(rasp.Aggregate(everything, rasp.tokens, default=0)).named("avg")
    _raises(aggregate, "ab", "avg", "'a'")


def test_length_mismatch_between_operands():
    short = rasp.ConstantSOp([1], check_length=False)
    _raises(rasp.SequenceMap(max, short, rasp.tokens).named("zip"), "ab", "zip", "1 vs 2")
    everything = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE)
    _raises(rasp.Aggregate(everything, short).named("agg"), "ab", "agg", "2 vs 1")
    loose = rasp.ConstantSelector([[True]], check_length=False)
    _raises(rasp.SelectorAnd(everything, loose).named("both"), "ab", "both", "(2, 2)")


def test_unknown_expression_type():
    class Mystery(rasp.SOp):
        @property
        def children(self):
            return (rasp.tokens,)

    _raises(Mystery().named("enigma"), "ab", "enigma", "Mystery")


def test_non_expression():
    with pytest.raises(rasp.RaspEvaluationError, match="str"):
        rasp.evaluate("tokens", [1])
