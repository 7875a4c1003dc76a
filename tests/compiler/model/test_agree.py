"""The one agree rule (`compiler.model.agree`) and the exactness check that reads it.

The regression: claims fuzz program 183 of seed 0 reads a numerical output that can be None out
through a categorical copy, whose value set keeps one of two float-rounding twins
(-0.6666666666666667 for the evaluator's -0.6666666666666666 too). The differential fuzz agreed
with RASP (within the tolerance), while the exactness check looked the evaluator's value up by
equality, found no logit for it and scored 7 of 84 inputs wrong: a "silent mismatch" that was
neither. Both now read the same rule.

A second shape (claims fuzz program 2248 of seed 0): the categorical output holds both twins as
values of their own, so the evaluator's value has a logit, but the model writes its twin's; the
exactness check counts a twin of the expected value as right (`twin_classes`).
"""

import numpy as np
import pytest

from compiler import compile_rasp
from compiler.model.agree import AGREE_TOLERANCE, agreeing_index, same_outputs, same_value, twin_classes
from compression.claims import claim_check
from compression.evaluation import build_reference_set
from compression.task import CompressionTask, frozen_from_compiled, input_space_of, task_of
from rasp import rasp


@pytest.mark.parametrize(("got", "expected", "agree"), [
    (None, None, True),
    (None, 0, False),
    (0, None, False),
    (-0.6666666666666667, -0.6666666666666666, True),
    (1000.5, 1000.0, True),  # relative: 0.5 <= 1e-3 * 1000
    (0.0015, 0.0, False),  # absolute near zero: 0.0015 > 1e-3
    (1, 1.0, True),
    (True, 1, True),
    ("a", "a", True),
    ("a", "b", False),
    ((1, 2), (1, 2), True),
])
def test_same_value(got, expected, agree):
    assert same_value(got, expected) is agree


def test_same_outputs_needs_one_length():
    assert same_outputs([1, None, 0.5], [1, None, 0.5 + AGREE_TOLERANCE / 2])
    assert not same_outputs([1, None], [1, None, 2])


def test_agreeing_index_prefers_the_equal_value_then_the_nearest_twin():
    values = (-0.6666666666666667, 0.0, 0.001, "a")
    assert agreeing_index(values, -0.6666666666666666) == 0
    assert agreeing_index(values, 0.0009) == 2  # 0.0 agrees too, 0.001 is nearer
    assert agreeing_index(values, 0.0) == 1
    assert agreeing_index(values, "a") == 3
    assert agreeing_index(values, "b") == -1
    assert agreeing_index(values, 0.5) == -1


def test_a_reference_twin_targets_the_output_value_it_agrees_with():
    refs = build_reference_set(np.zeros((1, 3), np.int32), _Space(), lambda tokens: [-0.6666666666666666, 7],
                               "categorical", (-1.0, -0.6666666666666667, 0.0))
    assert refs.targets[0].tolist() == [0, 1, -1]
    assert refs.mask[0].tolist() == [0.0, 1.0, 1.0]


class _Space:
    """An input space whose every row decodes to the same tokens (the reference ignores them)."""

    def decode(self, row):
        return list(row)


def _program_183() -> rasp.SOp:
    """Claims fuzz program 183 of seed 0 (vocabulary -1..2, length 3): the mean ``v5`` plus ``v3``
    gives -2/3 as ``-1/3 + 0`` and ``1/3 + -1``, two floats; ``v6`` can be None, so the compiler
    reads it out through a categorical copy that keeps one of them."""
    v2 = rasp.Map(lambda x: min(x, 2), rasp.tokens, simplify=False).named("v2")
    v3 = rasp.numerical(rasp.Map(lambda x: 1 if isinstance(x, float) else x, rasp.tokens)).named("v3")
    v4 = rasp.Select(v2, rasp.tokens, rasp.Comparison.LEQ).named("v4")
    v5 = rasp.numerical(rasp.Aggregate(v4, v2, default=None)).named("v5")
    return rasp.numerical(rasp.LinearSequenceMap(v5, v3, 1, 1)).named("v6")


@pytest.mark.filterwarnings("ignore::compiler.errors.CausalSemanticsWarning")
def test_the_compiled_model_of_program_183_is_exact_under_the_rule():
    program = _program_183()
    compiled = compile_rasp(program, {-1, 0, 1, 2}, 3, causal=True, optimize=False)
    values = compiled.output_encoder.values
    assert -0.6666666666666667 in values and -0.6666666666666666 not in values
    task = CompressionTask("program-183", program, compiled, frozen_from_compiled(compiled),
                           input_space_of(compiled), True)
    check, kind, _ = claim_check(task)
    assert kind == "exhaustive" and check.refs.checked == 84
    assert len(check.wrong_inputs(None)) == 0


def test_twin_classes_join_float_rounding_twins_only():
    values = (0.0, 1.6666666666666665, 1.6666666666666667, 1.667, "a", 2, True)
    assert twin_classes(values).tolist() == [0, 1, 1, 3, 4, 5, 6]


def test_an_output_holding_both_twins_is_exact_under_the_rule():
    """``mean + zero`` reaches 5/3 as ``2/3 + 1`` (1.6666666666666665) and as ``5/3 + 0``; the copy
    the output reads merges the two, so the model writes one twin where the evaluator has the other,
    although the output has a logit for each."""
    prefix = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ).named("prefix")
    mean = rasp.numerical(rasp.Aggregate(prefix, rasp.tokens, default=0)).named("mean")
    zero = rasp.numerical(rasp.Map(lambda x: int(x == 0), rasp.tokens)).named("zero")
    shifted = rasp.numerical(rasp.LinearSequenceMap(mean, zero, 1, 1)).named("shifted")
    program = rasp.SequenceMap(lambda x, y: x + y, shifted, rasp.tokens).named("out")
    compiled = compile_rasp(program, {0, 1, 2}, 4, compiler_bos="BOS")
    values = compiled.output_encoder.values
    assert 2.6666666666666665 in values and 2.666666666666667 in values
    unequal = 0
    for xs in ([1, 2, 2], [2, 2, 1], [0, 1, 1], [2, 0, 2, 1]):
        got, want = compiled.apply(["BOS", *xs]).decoded[1:], rasp.evaluate(program, xs)
        assert same_outputs(got, want), (xs, got, want)
        unequal += got != want
    assert unequal > 0  # the model does write a twin of the evaluator's value
    check, kind, _ = claim_check(task_of(compiled, program))
    assert kind == "exhaustive" and check.refs.checked == 120
    assert len(check.wrong_inputs(None)) == 0


def test_same_outputs_compares_several_outputs_by_label() -> None:
    """Several outputs agree when they have the same labels and each sequence agrees."""
    assert same_outputs({"a": [1, None], "b": [2.0]}, {"a": [1, None], "b": [2.0005]})
    assert not same_outputs({"a": [1, None], "b": [2.0]}, {"a": [1, None], "b": [2.1]})
    assert not same_outputs({"a": [1]}, {"a": [1], "b": [2]})
    assert not same_outputs({"a": [1]}, [1])
