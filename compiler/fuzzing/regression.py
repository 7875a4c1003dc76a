"""Write a (shrunk) failing program as a self-contained pytest file."""

from __future__ import annotations

import textwrap
from pathlib import Path

from compiler.fuzzing.differential import Outcome
from compiler.fuzzing.program_spec import ProgramSpec, to_source
from compiler.fuzzing.shrink import Case


def render_test(name: str, spec: ProgramSpec, case: Case, outcome: Outcome, origin: str) -> str:
    """Source of a pytest module whose single test reproduces the failure."""
    detail = "\n".join(f"#   {line}" for line in (outcome.detail or "").strip().splitlines()[-6:])
    body = textwrap.indent(to_source(spec), "    ")
    norm = "" if case.norm is None else f", norm={case.norm!r}"
    return f'''"""Fuzzer failure {name}: {outcome.status} ({outcome.reason}); {origin}."""

from rasp import lib, rasp  # noqa: F401

from compiler.fuzzing.differential import assert_exact

# Observed:
{detail}


def test_{name}():
{body}    assert_exact(program, vocab={list(case.vocab)!r}, max_seq_len={case.max_seq_len}, causal={case.causal}{norm})
'''


def write_test(directory: Path, name: str, spec: ProgramSpec, case: Case, outcome: Outcome, origin: str) -> Path:
    """Write `test_<name>.py` into `directory` (created if needed) and return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"test_{name}.py"
    path.write_text(render_test(name, spec, case, outcome, origin), encoding="utf-8")
    return path
