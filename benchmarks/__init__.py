"""Benchmark and fuzzing scripts (runnable as `python -m benchmarks.<name>`); each prints a table.

Nothing imports a benchmark script.
"""

__all__: list[str] = []
