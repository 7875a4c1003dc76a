"""Shared helpers of the CLI, file, picture and export tests: small compiled models, CLI runs."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import subprocess
import sys
from collections.abc import Sequence

from compiler import CompiledModel, compile_rasp
from compiler.cli.examples import EXAMPLES

REPO = pathlib.Path(__file__).resolve().parents[2]

# A user program file for the CLI tests: an s-op, a builder function, programs that fail.
PROGRAM_FILE = '''
from rasp import lib, rasp

doubled = rasp.Map(lambda x: 2 * x, rasp.tokens).named("doubled")


def make_reverse():
    return lib.make_reverse(rasp.tokens)


def unsupported():
    smaller = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.LT)
    mean = rasp.numerical(rasp.Aggregate(smaller, rasp.tokens))
    return rasp.SequenceMap(lambda a, b: a + b, rasp.Map(lambda x: x / 2, mean), rasp.tokens)


def broken():
    raise RuntimeError("the builder is broken")


not_a_program = 3
'''


def example_model(name: str, causal: bool = False, optimize: bool = True) -> CompiledModel:
    """A library example compiled with its default vocabulary and length."""
    example = EXAMPLES[name]
    program = example.build(example.max_seq_len)
    return compile_rasp(program, example.vocab, example.max_seq_len, causal=causal, optimize=optimize)


def example_tokens(name: str) -> list:
    return ["BOS", *EXAMPLES[name].example_input]


@dataclasses.dataclass(frozen=True)
class CliRun:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def run_cli(args: Sequence[str], cwd: pathlib.Path) -> CliRun:
    """`python -m compiler.cli ARGS` in a fresh interpreter, working directory `cwd`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.setdefault("JAX_PLATFORMS", "cpu")
    done = subprocess.run(
        [sys.executable, "-m", "compiler.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return CliRun(tuple(args), done.returncode, done.stdout, done.stderr)
