"""`rasp.Loop`: the unrolled semantics, the evaluator's rules, and the construction's errors."""

from __future__ import annotations

import random

import pytest

from rasp import lib, rasp


def _shift_xor(state: rasp.SOp) -> rasp.SOp:
    previous = rasp.Select(rasp.indices, rasp.indices, lambda k, q: k == q - 1 or k == q == 0)
    before = rasp.Aggregate(previous, state)
    return rasp.SequenceMap(lambda s, b: s ^ b, state, before)


@pytest.mark.parametrize("causal", [False, True])
def test_loop_equals_the_body_applied_steps_times(causal: bool) -> None:
    rng = random.Random(0)
    for steps in (1, 2, 5):
        loop = rasp.Loop(_shift_xor, rasp.tokens, steps)
        for _ in range(40):
            xs = [rng.randint(0, 1) for _ in range(rng.randint(1, 8))]
            unrolled = rasp.tokens
            for _ in range(steps):
                unrolled = _shift_xor(unrolled)
            assert loop(xs, causal=causal) == rasp.evaluate(unrolled, xs, causal=causal)


def test_body_reads_s_ops_built_outside_the_loop() -> None:
    offset = rasp.Map(lambda t: t + 1, rasp.tokens)
    loop = rasp.Loop(lambda s: rasp.SequenceMap(lambda a, b: (a + b) % 7, s, offset), rasp.tokens, 3)
    assert loop([1, 2, 3]) == [(x + 3 * (x + 1)) % 7 for x in (1, 2, 3)]


def test_counter_state_and_numerical_encoding() -> None:
    loop = rasp.Loop(lambda s: rasp.numerical(rasp.Map(lambda x: x + 1, s)), rasp.numerical(rasp.Map(lambda t: 0, rasp.tokens)), 4)
    assert rasp.is_numerical(loop)
    assert loop("ab") == [4, 4]


def test_library_loops_match_arithmetic() -> None:
    rng = random.Random(1)
    parity, addition = lib.make_parity_loop(11), lib.make_addition_loop(11)
    for _ in range(100):
        n = rng.randint(1, 12)
        bits = [rng.randint(0, 1) for _ in range(n)]
        assert parity(bits) == [sum(bits[: i + 1]) % 2 for i in range(n)]
        a, b = [rng.randint(0, 9) for _ in range(n)], [rng.randint(0, 9) for _ in range(n)]
        total = sum((x + y) * 10**i for i, (x, y) in enumerate(zip(a, b)))
        assert addition(list(zip(a, b))) == [(total // 10**i) % 10 for i in range(n)]
        assert addition(list(zip(a, b)), causal=True) == addition(list(zip(a, b)))


def test_evaluating_the_state_outside_its_loop_is_an_error() -> None:
    loop = rasp.Loop(_shift_xor, rasp.tokens, 2)
    with pytest.raises(rasp.RaspEvaluationError, match="state of a Loop"):
        rasp.evaluate(loop.next_state, [0, 1])


@pytest.mark.parametrize(
    ("body", "init", "steps", "error", "match"),
    [
        (lambda s: s, rasp.tokens, 2, ValueError, "unchanged"),
        (lambda s: rasp.Map(lambda t: t, rasp.tokens), rasp.tokens, 2, ValueError, "does not read the state"),
        (_shift_xor, rasp.tokens, 0, ValueError, "at least 1"),
        (_shift_xor, rasp.tokens, 2.0, TypeError, "must be an int"),
        (_shift_xor, rasp.tokens, True, TypeError, "must be an int"),
        (lambda s: 3, rasp.tokens, 2, TypeError, "must return an s-op"),
        ("not callable", rasp.tokens, 2, TypeError, "callable"),
        (lambda s: rasp.numerical(rasp.Map(lambda x: x, s)), rasp.tokens, 2, ValueError, "encoding"),
    ],
)
def test_bad_loops_are_refused_at_construction(body, init, steps, error, match) -> None:
    with pytest.raises(error, match=match):
        rasp.Loop(body, init, steps)
