"""Benchmark and fuzzing scripts (runnable as `python -m benchmarks.<name>`)."""
