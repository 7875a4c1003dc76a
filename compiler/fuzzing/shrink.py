"""Minimise a failing program while it still fails the same way.

Greedy delta debugging over `ProgramSpec`s: repeatedly try smaller candidates and keep the first
that still fails — make an earlier s-op the output, replace an operand by one of its own operands
(drops a Map, an and/or/not, a whole sub-program) or by `tokens`/`indices`, drop the `numerical`
annotation, then shrink the vocabulary and the maximum length.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterator

from compiler.fuzzing.program_spec import Op, ProgramSpec, prune


@dataclasses.dataclass(frozen=True)
class Case:
    """Everything a differential check needs besides the program."""

    vocab: tuple[Hashable, ...]
    max_seq_len: int
    causal: bool
    norm: str | None = None  # compile_rasp's norm


StillFails = Callable[[ProgramSpec, Case], bool]


def _with_op(spec: ProgramSpec, index: int, op: Op) -> ProgramSpec:
    ops = list(spec.ops)
    ops[index] = op
    return prune(ProgramSpec(tuple(ops)))


def program_candidates(spec: ProgramSpec) -> Iterator[ProgramSpec]:
    """Smaller or simpler variants of `spec`, most aggressive first."""
    ops = spec.ops
    last = len(ops) - 1
    for index in range(2, last):  # an earlier s-op as the output
        if not ops[index].is_selector:
            yield prune(ProgramSpec(ops[: index + 1]))
    for index in range(last, 1, -1):  # an operand replaced by its operands, tokens or indices
        op = ops[index]
        for position, arg in enumerate(op.args):
            replacements = [a for a in ops[arg].args if ops[a].is_selector == ops[arg].is_selector]
            if not ops[arg].is_selector:
                replacements += [0, 1]
            for new in dict.fromkeys(replacements):
                if new != arg:
                    args = op.args[:position] + (new,) + op.args[position + 1 :]
                    yield _with_op(spec, index, dataclasses.replace(op, args=args))
    for index in range(last, 1, -1):  # a numerical annotation dropped
        op = ops[index]
        if op.numerical:
            yield _with_op(spec, index, dataclasses.replace(op, numerical=False))


def case_candidates(case: Case) -> Iterator[Case]:
    """The same case with one token fewer, or a shorter maximum length."""
    if len(case.vocab) > 1:
        for token in case.vocab:
            yield dataclasses.replace(case, vocab=tuple(t for t in case.vocab if t != token))
    if case.max_seq_len > 1:
        yield dataclasses.replace(case, max_seq_len=case.max_seq_len - 1)


def _weight(spec: ProgramSpec, case: Case) -> tuple[int, int, int, int]:
    return (spec.size, sum(op.numerical for op in spec.ops), case.max_seq_len, len(case.vocab))


def shrink(spec: ProgramSpec, case: Case, still_fails: StillFails, max_checks: int = 300) -> tuple[ProgramSpec, Case]:
    """The smallest (program, case) found from `spec`, `case` that `still_fails`."""
    checks = 0
    improved = True
    while improved and checks < max_checks:
        improved = False
        for candidate in program_candidates(spec):
            if _weight(candidate, case) >= _weight(spec, case) or candidate.size < 1:
                continue
            checks += 1
            if still_fails(candidate, case):
                spec, improved = candidate, True
                break
            if checks >= max_checks:
                break
        if improved:
            continue
        for smaller in case_candidates(case):
            checks += 1
            if still_fails(spec, smaller):
                case, improved = smaller, True
                break
            if checks >= max_checks:
                break
    return spec, case
