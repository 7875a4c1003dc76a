"""Benchmark and fuzzing scripts (runnable as `python -m benchmarks.<name>`); each prints a table.

Nothing in the project imports a benchmark script; one test does: the claims fuzz in the default
tests (tests/compression/test_claims_fuzz.py) runs `benchmarks.claims`'s own per-program code, so
the benchmark and its test cannot drift apart.
"""

__all__: list[str] = []
