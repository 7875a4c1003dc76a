"""Benchmark and fuzzing scripts (runnable as `python -m benchmarks.<name>`); each prints a table.

`benchmarks.results` is the one renderer of measured tables: a benchmark that publishes one saves
it with `--json PATH` (table, command, commit, machine), docs pages quote it in a result block,
and `python -m benchmarks.results --check` re-runs the quick ones.

Nothing in the project imports a benchmark script; tests do: the claims fuzz in the default
tests (tests/compression/test_claims_fuzz.py) runs `benchmarks.claims`'s own per-program code, so
the benchmark and its test cannot drift apart, and tests/test_results.py runs the results check.
"""

__all__: list[str] = []
