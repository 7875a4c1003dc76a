"""Every invalid program and every bad input gets a clear error naming what is wrong."""

from __future__ import annotations

import math

import pytest

from compiler import (
    CausalSemanticsWarning,
    InvalidInputError,
    UnsupportedProgramError,
    ValueInferenceError,
    compile_rasp,
    validate,
)
from rasp import lib, rasp

VOCAB = {1, 2, 3}


def _problems(program: rasp.SOp, causal: bool = False, vocab=VOCAB, max_seq_len: int = 4) -> list[str]:
    problems = validate(program, vocab, max_seq_len, causal=causal)
    with pytest.raises(UnsupportedProgramError) as raised:
        compile_rasp(program, vocab, max_seq_len, causal=causal)
    assert list(raised.value.problems) == problems
    return problems


def test_program_without_tokens_is_refused():
    program = rasp.Map(lambda i: i + 1, rasp.indices).named("shifted")
    (problem,) = _problems(program)
    assert "shifted" in problem and "tokens" in problem


def test_categorical_aggregate_with_default_compiles_through_bos():
    select = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT)
    program = rasp.Aggregate(select, rasp.Map(lambda t: 1, rasp.tokens), default=0).named("prev_one")
    assert validate(program, VOCAB, 4) == []
    model = compile_rasp(program, VOCAB, 4)
    assert model.apply(["BOS", 3, 1, 2]).decoded[1:] == program([3, 1, 2]) == [0, 1, 1]


def test_numerical_aggregate_with_huge_default_is_refused():
    select = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT)
    values = rasp.numerical(rasp.Map(lambda t: t, rasp.tokens))
    program = rasp.numerical(rasp.Aggregate(select, values, default=1e12)).named("mean_before")
    (problem,) = _problems(program)
    assert problem.startswith("mean_before: numerical Aggregate with default=1000000000000.0")
    assert "magnitude at most 1e+09" in problem


def test_default_is_irrelevant_when_the_selector_always_selects():
    select = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ)
    values = rasp.numerical(rasp.Map(lambda t: t, rasp.tokens))
    program = rasp.numerical(rasp.Aggregate(select, values, default=7))
    assert validate(program, VOCAB, 4) == []


def test_numerical_sops_read_as_one_hots_get_a_categorical_copy():
    # A categorical Aggregate of a numerical s-op and a selector over one compile exactly: the
    # compiler inserts a discretised categorical copy (`<label>_categorical`) first.
    values = rasp.numerical(rasp.Map(lambda t: t * 2, rasp.tokens)).named("num_tokens")
    select = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.EQ)
    copy = rasp.Aggregate(select, values).named("copy")
    keys = rasp.numerical(rasp.Map(lambda t: t, rasp.tokens)).named("num_keys")
    width = rasp.SelectorWidth(rasp.Select(keys, rasp.tokens, rasp.Comparison.LT)).named("smaller")
    program = rasp.SequenceMap(lambda a, b: (a, b), copy, width)
    model = compile_rasp(program, VOCAB, 4, optimize=False)  # (fold_maps would absorb the copies)
    assert "num_tokens_categorical:6" in model.residual_labels
    assert "num_keys_categorical:3" in model.residual_labels
    optimised = compile_rasp(program, VOCAB, 4)
    for tokens in ([3, 1, 2], [2, 2], [1, 3, 3, 1]):
        assert model.apply(["BOS", *tokens]).decoded[1:] == program(tokens)
        assert optimised.apply(["BOS", *tokens]).decoded[1:] == program(tokens)


def test_or_of_selectors_over_a_none_able_sop_compiles_with_absent_parts():
    # (refused until the packed parts that can be None were read as `defined_or_absent`)
    previous = rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT), rasp.tokens)
    by_previous = rasp.Select(previous.named("previous"), rasp.tokens, rasp.Comparison.EQ)
    by_index = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT)
    program = rasp.SelectorWidth(rasp.SelectorOr(by_previous, by_index).named("both")).named("either")
    assert validate(program, VOCAB, 4) == []
    model = compile_rasp(program, VOCAB, 4)
    assert "previous_or_absent" in model.graph.nodes
    for xs in ([1], [3, 3], [2, 2, 2, 1], [1, 1, 1, 3]):  # earlier tokens equal: previous defined
        assert model.apply(["BOS", *xs]).decoded[1:] == rasp.evaluate(program, xs)


def test_causal_program_reading_later_positions_warns_once_or_is_refused_when_strict():
    program = lib.make_length()
    with pytest.warns(CausalSemanticsWarning) as caught:
        model = compile_rasp(program, VOCAB, 4, causal=True)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "(read by length)" in message and "causal_strict=True" in message
    assert model.apply(["BOS", 3, 1, 2]).decoded[1:] == [1, 2, 3]  # the causal length
    with pytest.warns(CausalSemanticsWarning):
        assert validate(program, VOCAB, 4, causal=True) == []
    (problem,) = validate(program, VOCAB, 4, causal=True, causal_strict=True)
    assert problem.startswith("length: in causal mode its selector may select keys after the query")
    with pytest.raises(UnsupportedProgramError):
        compile_rasp(program, VOCAB, 4, causal=True, causal_strict=True)
    assert validate(program, VOCAB, 4, causal=False) == []


def test_every_problem_is_listed_at_once():
    select = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT)
    values = rasp.numerical(rasp.Map(lambda t: t, rasp.tokens))
    first = rasp.numerical(rasp.Aggregate(select, values, default=1e12)).named("first_bad")
    second = rasp.numerical(rasp.Aggregate(select, values, default=-1e10)).named("second_bad")
    program = rasp.SequenceMap(lambda a, b: (a, b), rasp.Map(lambda x: x > 1, first), rasp.Map(lambda x: x > 1, second))
    problems = _problems(program)
    assert any("first_bad" in p for p in problems) and any("second_bad" in p for p in problems)


@pytest.mark.parametrize(
    "function,needle",
    [
        (lambda t: 1 // (t - 2), "ZeroDivisionError"),
        (lambda t: [t], "unhashable"),
        (lambda t: math.nan, "NaN"),
    ],
    ids=["raises", "unhashable", "nan"],
)
def test_value_inference_errors_name_the_sop(function, needle):
    program = rasp.Map(function, rasp.tokens).named("bad_map")
    with pytest.raises(ValueInferenceError, match=needle) as raised:
        compile_rasp(program, VOCAB, 4)
    assert "bad_map" in str(raised.value)
    assert validate(program, VOCAB, 4) == [str(raised.value)]


def test_exploding_value_set_names_size_and_advice():
    wide = rasp.numerical(rasp.Map(lambda t: t * 1.37 + 0.01 * t * t, rasp.tokens))
    select = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ)
    program = rasp.numerical(rasp.Aggregate(select, wide, default=0)).named("means")
    with pytest.raises(ValueInferenceError, match="means") as raised:
        compile_rasp(program, set(range(40)), 30)
    assert "100000" in str(raised.value) and "max_seq_len" in str(raised.value)


def test_bad_inputs_are_rejected_with_the_token_or_length():
    model = compile_rasp(lib.make_reverse(rasp.tokens), VOCAB, 4)
    with pytest.raises(InvalidInputError, match="9"):
        model.apply(["BOS", 1, 9])
    with pytest.raises(InvalidInputError, match="max_seq_len=4"):
        model.apply(["BOS", 1, 2, 3, 1, 2])
    with pytest.raises(InvalidInputError, match="BOS"):
        model.apply([1, 2, 3])
    with pytest.raises(InvalidInputError, match="position 2"):
        model.apply(["BOS", 1, "BOS"])


@pytest.mark.parametrize("special", ["compiler_bos", "compiler_pad"])
def test_special_tokens_inside_the_vocab_are_rejected(special):
    kwargs = {special: 1}
    with pytest.raises(InvalidInputError, match=special):
        compile_rasp(lib.make_length(), VOCAB, 4, **kwargs)


@pytest.mark.parametrize(
    "vocab,max_seq_len,needle",
    [("abc", 4, "string"), (set(), 4, "empty"), (VOCAB, 0, "max_seq_len")],
)
def test_bad_arguments(vocab, max_seq_len, needle):
    with pytest.raises(InvalidInputError, match=needle):
        compile_rasp(lib.make_length(), vocab, max_seq_len)


def test_two_expressions_sharing_a_label_compile_with_a_suffix():
    first = rasp.Map(lambda t: t + 1, rasp.tokens).named("same")
    second = rasp.Map(lambda t: t + 2, rasp.tokens).named("same")
    program = rasp.SequenceMap(lambda a, b: a + b, first, second)
    assert validate(program, VOCAB, 4) == []
    model = compile_rasp(program, VOCAB, 4, optimize=False)
    assert model.apply(["BOS", 1, 3]).decoded[1:] == program([1, 3]) == [5, 9]
    assert {"same", "same_2"} <= set(model.graph)


def test_selector_as_program_is_rejected():
    with pytest.raises(UnsupportedProgramError, match="s-op"):
        compile_rasp(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ), VOCAB, 4)


def test_blocks_too_large_to_build_are_refused_with_their_size():
    # A predicate without a fast path is called once per query/key value pair.
    select = rasp.Select(rasp.tokens, rasp.tokens, lambda key, query: key < query)
    program = rasp.SelectorWidth(select).named("big")
    (problem,) = _problems(program, vocab=set(range(5000)), max_seq_len=3)
    assert problem.startswith("big: its selector compares 25,000,000 query/key value pairs one by one")
