"""Differential fuzzing of the compiler against the RASP evaluator (see benchmarks/fuzz.py).

The program generator: `random_programs.generate` draws a seeded random program as a
`program_spec.ProgramSpec` (plain data that prints as runnable Python), whose functions come
from the printable menu in `function_menu`. Checking: `differential` checks one program,
`numpy_forward` runs compiled weights quickly without JAX, `shrink` minimises a failing program,
`regression` writes it as a pytest file, `buckets` groups refusal messages, and `driver` is the
command line behind `benchmarks/fuzz.py`.
"""

__all__: list[str] = []
