"""Aggregate defaults written through BOS: exact, causal and non-causal, and BOS stays zero."""

import pytest

from compiler.fuzzing.differential import assert_exact
from rasp import rasp

VOCAB = ["a", "b", "c"]
BEFORE = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT)
PREVIOUS = rasp.Select(rasp.indices, rasp.indices, lambda k, q: k == q - 1)
WEIGHTS = rasp.numerical(rasp.Map(lambda t: {"a": 2, "b": 0.5, "c": -1}[t], rasp.tokens))


@pytest.mark.parametrize("causal", [False, True])
def test_categorical_default(causal):
    program = rasp.Aggregate(PREVIOUS, rasp.tokens, default="none").named("prev")
    assert_exact(program, VOCAB, 5, causal=causal)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("default", [-2.5, 1, 1e6])
def test_numerical_default(default, causal):
    program = rasp.numerical(rasp.Aggregate(BEFORE, WEIGHTS, default=default)).named("mean")
    assert_exact(program, VOCAB, 5, causal=causal)


def test_readers_of_a_defaulted_sop_see_zero_at_bos():
    # A later head reads the defaulted s-op's value at the BOS key when it selects nothing: the
    # default must not leak there (the cancelling head keeps BOS at 0).
    mean = rasp.numerical(rasp.Aggregate(BEFORE, WEIGHTS, default=-2.5)).named("mean")
    same = rasp.Select(rasp.tokens, rasp.tokens, lambda k, q: k == q and k != "c")
    reader = rasp.numerical(rasp.Aggregate(same, mean, default=0)).named("reader")
    assert_exact(reader, VOCAB, 5)
    prev = rasp.Aggregate(PREVIOUS, rasp.tokens, default="none").named("prev")
    match = rasp.Select(prev, rasp.tokens, rasp.Comparison.EQ)
    copied = rasp.Aggregate(match, rasp.indices, default=None).named("copied")
    assert_exact(rasp.Map(lambda x: x, copied).named("out"), VOCAB, 4)
    squared = rasp.numerical(rasp.Map(lambda x: x * x, mean)).named("squared")
    assert_exact(squared, VOCAB, 6, causal=True)
