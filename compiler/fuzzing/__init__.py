"""Differential fuzzing of the compiler against the RASP evaluator (see benchmarks/fuzz.py).

The program generator: `random_programs.generate` draws a seeded random program as a
`program_spec.ProgramSpec` (plain data that prints as runnable Python), whose functions come
from the printable menu in `function_menu`. Checking: `differential` checks one program
(through the test oracle `compiler.model.oracle`, no JAX), `shrink` minimises a failing program,
`regression` writes it as a pytest file, `buckets` groups refusal messages, and `driver` is the
command line behind `benchmarks/fuzz.py`, `workers` its processes with a time limit per program.
"""

__all__: list[str] = []
