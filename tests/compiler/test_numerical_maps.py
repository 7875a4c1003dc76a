"""Numerical Maps on dense value sets: exact affine layers, measured error, or a named refusal.

Tolerance: compiled numerical outputs must be within 1e-4 * max(1, |rasp|) of the evaluator
(`NUMERICAL_MAP_TOLERANCE`), the bound validation enforces on every numerical -> numerical Map.
"""

import random

import numpy as np
import pytest

from compiler import UnsupportedProgramError, compile_rasp, validate
from compiler.cli.summary import model_summary
from craft.chamber.numerical_fit import NUMERICAL_MAP_TOLERANCE
from rasp import rasp

VOCAB = ("a", "b", "c")


def _mean_of(weights: dict) -> rasp.SOp:
    w = rasp.numerical(rasp.Map(lambda x: weights[x], rasp.tokens))
    prefix = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ)
    return rasp.numerical(rasp.Aggregate(prefix, w, default=0))


def _worst_relative_error(model, program, inputs) -> float:
    worst = 0.0
    outputs = model.apply_batch([["BOS"] + xs for xs in inputs])
    for xs, got in zip(inputs, outputs):
        want = rasp.evaluate(program, xs)
        for g, w in zip(got[1:], want):
            worst = max(worst, abs(g - w) / max(1.0, abs(w)))
    return worst


def _inputs(n: int, max_seq_len: int, seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    return [[rng.choice(VOCAB) for _ in range(rng.randint(1, max_seq_len))] for _ in range(n)]


def test_identity_of_a_dense_mean_is_exact():
    # The reported miscompilation: ramps gave 1.99781 for 2 and 1.43506 for 1.4375.
    mean = _mean_of({"a": 2, "b": 0.5, "c": -3})
    out = rasp.numerical(rasp.Map(lambda x: x, mean))
    model = compile_rasp(out, set(VOCAB), 16)
    got = model.apply(["BOS"] + list("ababaaba")).decoded[1:]
    want = rasp.evaluate(out, list("ababaaba"))
    assert want[:3] == [2, 1.25, 1.5] and want[-1] == 1.4375
    assert np.allclose(got, want, rtol=1e-6, atol=1e-6)
    assert model.numerical_map_errors[out.label][0] == "affine"
    assert model.numerical_error_bound < 1e-6
    assert model_summary(model)["numerical_error_bound"] == model.numerical_error_bound


MAPS = {
    "identity": lambda x: x,
    "affine": lambda x: 3 * x - 0.7,
    "square": lambda x: x * x,
    "threshold": lambda x: 1.0 if x > 0.3 else 0.0,
}


@pytest.mark.parametrize("max_seq_len", [8, 16, 32])
@pytest.mark.parametrize("name", sorted(MAPS))
def test_sweep_of_maps_after_a_dense_mean(name, max_seq_len):
    mean = _mean_of({"a": 2.1, "b": 1 / 3, "c": -2.7})  # non-dyadic weights
    program = rasp.numerical(rasp.Map(MAPS[name], mean))
    problems = validate(program, VOCAB, max_seq_len)
    if problems:  # refused with the reason: the measured error, the gap and the fix
        (problem,) = problems
        assert problem.startswith(f"{program.label}: numerical Map of {mean.label} is ")
        assert "smallest gap" in problem and "round(x, 2)" in problem
        with pytest.raises(UnsupportedProgramError):
            compile_rasp(program, VOCAB, max_seq_len)
        return
    model = compile_rasp(program, VOCAB, max_seq_len)
    assert model.numerical_error_bound <= NUMERICAL_MAP_TOLERANCE
    worst = _worst_relative_error(model, program, _inputs(200, max_seq_len, seed=max_seq_len))
    assert worst <= NUMERICAL_MAP_TOLERANCE
    if name in ("identity", "affine"):
        assert model.numerical_map_errors[program.label][0] == "affine"


def test_map_of_too_many_values_is_refused_naming_sop_gap_and_fix():
    mean = _mean_of({"a": 2.1, "b": 0.37, "c": -3.3}).named("mean")
    program = rasp.numerical(rasp.Map(lambda x: x**3, mean)).named("cube")
    (problem,) = validate(program, VOCAB, 32)
    assert problem.startswith("cube: numerical Map of mean is not affine on mean's ")
    assert "smallest gap" in problem and "within 0.0001" in problem
    assert "numerical(Map(lambda x: round(x, 2), mean))" in problem


def test_map_separating_float_noise_is_refused_with_its_measured_error():
    # A mean of means takes -0.7777777777777778 and -0.7777777777777777 (one real number, two
    # float64 roundings); a numerical Map telling them apart cannot be within 1e-4 in float32.
    prefix = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ)
    v3 = rasp.numerical(rasp.Aggregate(prefix, rasp.tokens, default=0)).named("v3")
    spread = rasp.Select(rasp.tokens, rasp.indices, lambda k, q: k > q or k == 0)
    frac = rasp.numerical(rasp.Aggregate(spread, v3, default=0)).named("frac")
    program = rasp.numerical(rasp.Map(lambda x: float(x < -0.7777777777777777), frac)).named("sign")
    (problem,) = validate(program, [-1, 1, 2], 3)
    assert problem.startswith("sign: numerical Map of frac is off by up to")
    assert "smallest gap is 1.39e-17" in problem and "round(x, 2), frac)" in problem
