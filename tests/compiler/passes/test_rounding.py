"""Float-rounding twins in the compiler's categorical copies (`compiler.passes.rounding`)."""

from __future__ import annotations

import pytest
from support import compare_with_evaluator, random_inputs

from compiler import compile_rasp
from compiler.passes.rounding import TwinMerge, representative, twin_groups
from compiler.passes.validate import validate
from rasp import lib, rasp

VOCAB = [1, 2, 3]


def _share() -> rasp.SOp:
    """The running mean of 0.1 per token 1: 0.1 * k / n summed in order, so one real number
    appears as two floats (0.05 and 0.05000000000000001)."""
    prefix = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ).named("prefix")
    tenth = rasp.numerical(rasp.Map(lambda t: 0.1 if t == 1 else 0, rasp.tokens)).named("tenth")
    return rasp.numerical(rasp.Aggregate(prefix, tenth, default=0)).named("share")


def test_twin_groups_are_neighbours_within_float_rounding():
    values = {0.05, 0.05000000000000001, 0.1, 1.0, 0.9999999999999991, 2, None, "x"}
    assert twin_groups(values) == [(0.05, 0.05000000000000001), (0.9999999999999991, 1.0)]
    assert twin_groups({1.0, 1.000001, 2.0}) == []  # 1e-6 apart: two numbers, not twins


def test_the_representative_prints_shortest():
    assert representative((0.12, 0.12000000000000002)) == 0.12
    merge = TwinMerge(((0.12000000000000002, 0.12),))
    assert merge(0.12000000000000002) == 0.12 and merge(0.5) == 0.5 and merge("a") == "a"


def test_a_lookup_whose_result_ignores_the_twins_compiles():
    # Before: refused ("share_categorical: reads the numerical s-op share, whose values 0.05 and
    # 0.05000000000000001 are only 6.94e-18 apart").
    above = rasp.SequenceMap(lambda m, t: m > 0.0123 * t, _share(), rasp.tokens).named("above")
    assert validate(above, VOCAB, 6) == []


def test_a_head_comparing_the_twins_stays_refused():
    # GT between two twins is the evaluator's float rounding, not the program: no model can
    # follow it, so the copy keeps both values and validation names them.
    share = _share()
    width = rasp.SelectorWidth(rasp.Select(share, share, rasp.Comparison.GT)).named("width")
    (problem,) = validate(width, VOCAB, 6)
    assert problem.startswith("share_categorical: reads the numerical s-op share") and "apart" in problem


def test_a_lookup_whose_result_depends_on_the_twins_stays_refused():
    # 0.02 * 1 lies between the twins 0.02 and 0.020000000000000004 at max_seq_len 32.
    above = rasp.SequenceMap(lambda m, t: m > 0.02 * t, _share(), rasp.tokens).named("above")
    (problem,) = validate(above, VOCAB, 32)
    assert "0.02 and 0.020000000000000004" in problem


def test_twin_sums_read_out_through_a_copy_compile():
    # share's copy feeds total = previous + share (numerical, None at position 0, so it is read
    # out through a categorical copy): the twins' sums are twins of total, which the read-out
    # merges in turn. Before: refused at max_seq_len 32 (0.061538461538461535 and
    # 0.06153846153846155).
    previous = lib.shift_by(1, rasp.tokens).named("previous")
    total = rasp.numerical(rasp.LinearSequenceMap(previous, _share(), 1, 1)).named("total")
    assert validate(total, VOCAB, 32) == []


def _reads_share_twice() -> rasp.SOp:
    # share >= share: the evaluator only pairs a value with itself (True), though the twins
    # 0.05 and 0.05000000000000001 compared with each other would differ.
    share = _share()
    return rasp.SequenceMap(lambda x, y: x >= y, share, share).named("at_least_itself")


def test_a_lookup_reading_the_copy_twice_needs_equal_results_on_the_diagonal_only():
    # Before: refused ("share_categorical: reads the numerical s-op share, whose values 0.05 and
    # 0.05000000000000001 are only 6.94e-18 apart"); fuzz programs of this shape were refused.
    assert validate(_reads_share_twice(), VOCAB, 6) == []
    share = _share()
    differs = rasp.SequenceMap(lambda x, y: x + y > 0.1, share, share).named("differs")
    (problem,) = validate(differs, VOCAB, 6)  # 0.05 + 0.05 > 0.1 is False, for the other twin True
    assert problem.startswith("share_categorical: reads the numerical s-op share") and "apart" in problem


@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_a_lookup_reading_the_copy_twice_matches_the_evaluator(causal):
    program = _reads_share_twice()
    model = compile_rasp(program, VOCAB, 6, causal=causal)
    inputs = random_inputs(VOCAB, 6, 200, seed=6)
    assert compare_with_evaluator(model, program, inputs, causal, program.label) == 200
