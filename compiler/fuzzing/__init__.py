"""Differential fuzzing of the compiler against the RASP evaluator (see benchmarks/fuzz.py).

`differential` checks one program, `numpy_forward` runs compiled weights quickly without JAX,
`shrink` minimises a failing program, `regression` writes it as a pytest file, `buckets` groups
refusal messages, and `driver` is the command line.
"""
