"""Check one RASP program: validate, compile, run on inputs, compare with the evaluator.

Outcomes: EXACT (every input the evaluator accepts gives the same output), REFUSED (`validate`
named a reason; the reason is bucketed), MISMATCH (compiled output differs on an input the
evaluator accepts), CRASH (an exception that is not a documented `CompilerError`, or `validate`
passing while `compile_rasp` refuses), UNTESTED (the evaluator rejects every input, e.g. a
categorical Aggregate that always selects different values).
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import time
import traceback
import warnings
from collections.abc import Hashable, Sequence
from typing import Any, cast

from compiler.compiling import compile_rasp
from compiler.enums import StrEnum
from compiler.errors import CausalSemanticsWarning, CompilerError
from compiler.fuzzing.buckets import refusal_bucket
from compiler.model import oracle
from compiler.model.agree import same_value
from compiler.model.compiled_model import CompiledModel
from compiler.model.encoders import OutputEncoder
from compiler.passes.validate import validate
from rasp import rasp


class Verdict(StrEnum):
    """The class of one differential check (module docstring); the failures are upper case."""

    EXACT = "exact"
    REFUSED = "refused"
    MISMATCH = "MISMATCH"
    CRASH = "CRASH"
    UNTESTED = "untested"


EXACT, REFUSED, MISMATCH, CRASH, UNTESTED = Verdict
FAILURES = (MISMATCH, CRASH)
BOS = "BOS"


@dataclasses.dataclass(frozen=True)
class Outcome:
    """The class of one (program, vocab, max_seq_len, causal) check and why."""

    status: str
    reason: str = ""
    detail: str = ""
    compared: int = 0
    seconds: float = 0.0


def sample_inputs(vocab: Sequence[Hashable], max_seq_len: int, budget: int, seed: int) -> list[list]:
    """Every input when there are at most `budget`, else `budget` random ones.

    The random sample always holds one input of each length, including `max_seq_len`.
    """
    tokens = sorted(set(vocab), key=repr)
    total = sum(len(tokens) ** n for n in range(1, max_seq_len + 1))
    if total <= budget:
        return [list(xs) for n in range(1, max_seq_len + 1) for xs in itertools.product(tokens, repeat=n)]
    rng = random.Random(seed)
    lengths = list(range(1, max_seq_len + 1))
    lengths += [rng.randint(1, max_seq_len) for _ in range(max(0, budget - len(lengths)))]
    return [[rng.choice(tokens) for _ in range(n)] for n in lengths]


def run_model(model: CompiledModel, inputs: list[list], engine: str) -> list[list]:
    """Decoded outputs (BOS position dropped) with the real JAX model or the numpy interpreter."""
    encoder = model.output_encoder
    assert isinstance(encoder, OutputEncoder)  # one program (not a list): one decoded sequence per input
    batch = [[BOS] + xs for xs in inputs]
    if engine == "jax":
        return [row[1:] for row in cast(list[list[Any]], model.apply_batch(batch))]
    ids = model.input_encoder.encode_batch(batch)
    output = oracle.forward(model.config, model.params, ids)
    decode = encoder.decode
    return [decode(output[row])[1 : len(tokens)] for row, tokens in enumerate(batch)]


def _crash(stage: str, error: BaseException, started: float) -> Outcome:
    summary = f"{stage}: {type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
    return Outcome(CRASH, summary, traceback.format_exc(), seconds=time.perf_counter() - started)


def check_program(
    program: rasp.SOp,
    vocab: Sequence[Hashable],
    max_seq_len: int,
    causal: bool,
    inputs: list[list],
    engine: str = "numpy",
    norm: str | None = None,
) -> Outcome:
    """Classify `program` on `inputs` (see the module docstring), compiled with `norm` (None,
    "layernorm" or "rmsnorm", `compile_rasp`'s argument).

    A causal program reading later positions is compared with the causal evaluator like any
    other; its `CausalSemanticsWarning` is expected here and silenced.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalSemanticsWarning)
        return _check_program(program, vocab, max_seq_len, causal, inputs, engine, norm)


def _check_program(
    program: rasp.SOp,
    vocab: Sequence[Hashable],
    max_seq_len: int,
    causal: bool,
    inputs: list[list],
    engine: str,
    norm: str | None,
) -> Outcome:
    started = time.perf_counter()
    try:
        problems = validate(program, vocab, max_seq_len, causal)
    except Exception as error:
        return _crash("validate", error, started)
    if problems:
        return Outcome(REFUSED, refusal_bucket(problems[0]), "\n".join(problems),
                       seconds=time.perf_counter() - started)
    try:
        model = compile_rasp(program, vocab, max_seq_len, causal=causal, norm=norm)
    except CompilerError as error:
        return Outcome(CRASH, f"validate passed but compile refused: {refusal_bucket(str(error))}",
                       str(error), seconds=time.perf_counter() - started)
    except Exception as error:
        return _crash("compile", error, started)
    kept, expected = [], []
    for xs in inputs:
        try:
            expected.append(rasp.evaluate(program, xs, causal=causal))
        except rasp.RaspEvaluationError:
            continue
        except Exception as error:
            return _crash("evaluate", error, started)
        kept.append(xs)
    if not kept:
        return Outcome(UNTESTED, "the evaluator rejects every input", seconds=time.perf_counter() - started)
    try:
        outputs = run_model(model, kept, engine)
    except Exception as error:
        return _crash(f"run ({engine})", error, started)
    for xs, want, got in zip(kept, expected, outputs):
        if len(got) != len(want) or not all(same_value(g, w) for g, w in zip(got, want)):
            return Outcome(
                MISMATCH,
                f"{'numerical' if rasp.is_numerical(program) else 'categorical'} output differs",
                f"input {xs!r}: compiled {got!r}, rasp {want!r}",
                compared=len(kept),
                seconds=time.perf_counter() - started,
            )
    return Outcome(EXACT, compared=len(kept), seconds=time.perf_counter() - started)


def assert_exact(
    program: rasp.SOp,
    vocab: Sequence[Hashable],
    max_seq_len: int,
    causal: bool = False,
    *,
    allow_refusal: bool = False,
    budget: int = 512,
    engine: str = "jax",
    norm: str | None = None,
) -> Outcome:
    """Test helper: fail unless the program compiles exactly (or, if allowed, is refused)."""
    inputs = sample_inputs(vocab, max_seq_len, budget, seed=0)
    outcome = check_program(program, vocab, max_seq_len, causal, inputs, engine=engine, norm=norm)
    allowed = (EXACT, UNTESTED, REFUSED) if allow_refusal else (EXACT,)
    assert outcome.status in allowed, f"{outcome.status}: {outcome.reason}\n{outcome.detail}"
    return outcome
