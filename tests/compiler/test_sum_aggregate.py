"""SumAggregate: evaluator semantics, and compiled models equal to the evaluator.

Differential: 200 random inputs per setting, max_seq_len 8 and 32, plain and causal, for a prefix
sum (the count is read off `indices`: one layer) and for a selector comparing tokens (the count is
the selector's width: two layers), numerical and categorical, with a non-zero default.
"""

from __future__ import annotations

import warnings

import pytest
from support import compare_with_evaluator, random_inputs

from compiler import CausalSemanticsWarning, compile_rasp
from compiler.passes.sums import TimesCount, prefix_counts
from rasp import lib, rasp

INPUTS = 200


def _value() -> rasp.SOp:
    return rasp.numerical(rasp.Map(lambda t: t - 2, rasp.tokens)).named("value")


def _programs() -> dict[str, rasp.SOp]:
    smaller = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.LT).named("smaller")
    return {
        "prefix_sum": lib.make_prefix_sum(_value()),
        "sum_smaller": rasp.SumAggregate(smaller, _value(), default=-7).named("sum_smaller"),
        "sum_smaller_categorical": rasp.categorical(
            rasp.SumAggregate(smaller, rasp.tokens).named("sum_smaller_categorical")
        ),
    }


def _assert_matches(program: rasp.SOp, vocab: list, max_seq_len: int, causal: bool) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalSemanticsWarning)
        model = compile_rasp(program, vocab, max_seq_len, causal=causal)
    inputs = random_inputs(vocab, max_seq_len, INPUTS, seed=max_seq_len)
    # every input is inside a sum's domain: none may be skipped
    assert compare_with_evaluator(model, program, inputs, causal, program.label) == len(inputs)


# The default run covers both sizes and both modes; the other two pairings are slow tests.
SETTINGS = (
    (8, False),
    (32, True),
    pytest.param(8, True, marks=pytest.mark.slow),
    pytest.param(32, False, marks=pytest.mark.slow),
)


@pytest.mark.parametrize("max_seq_len,causal", SETTINGS)
@pytest.mark.parametrize("name", sorted(_programs()))
def test_sum_aggregate_matches_evaluator(name, max_seq_len, causal):
    _assert_matches(_programs()[name], [1, 2, 3, 4], max_seq_len, causal)


def test_prefix_sum_takes_one_layer_and_a_general_sum_two():
    prefix = compile_rasp(lib.make_prefix_sum(_value()), [1, 2, 3], 16)
    general = compile_rasp(_programs()["sum_smaller"], [1, 2, 3], 16)
    assert prefix.config.num_layers == 1  # the mean's head, then the product MLP
    assert general.config.num_layers == 2  # heads, width decoder; (no attention), product MLP


def test_evaluator_sums_and_masks_causally():
    program = rasp.SumAggregate(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE), rasp.tokens)
    assert program([1, 2, 3]) == [6, 6, 6]
    assert program([1, 2, 3], causal=True) == [1, 3, 6]
    assert rasp.is_numerical(program)
    empty = rasp.SumAggregate(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.FALSE), rasp.tokens, default=5)
    assert empty([1, 2]) == [5, 5]


def test_evaluator_refuses_non_numbers():
    program = rasp.SumAggregate(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE), rasp.tokens)
    with pytest.raises(rasp.RaspEvaluationError, match="non-numeric value"):
        program(["a", "b"])


def test_prefix_counts_only_for_selectors_that_never_read_later_keys():
    leq = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ)
    lt = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT)
    geq = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.GEQ)
    assert prefix_counts(leq, 4) == (1, 2, 3, 4)
    assert prefix_counts(lt, 4) == (0, 1, 2, 3)
    assert prefix_counts(geq, 4) is None
    assert prefix_counts(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ), 4) is None
    assert TimesCount((0, 1, 2)).multiplier(0) == 1  # nothing selected: the default passes through
    assert TimesCount().multiplier(3) == 3
