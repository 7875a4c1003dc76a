"""Time to refusal for oversized compiles, and (with `--before`) what they cost without the check.

Each case is compiled with the default `max_weight_bytes` (1 GiB), which refuses it with a
`ModelSizeError` before lowering builds anything; the table gives the median of `--repeats`
refusals, the estimate and the largest s-op, and the time to compile a small program (hist over
3 tokens) measured in the same run as a floor. `--before` runs each case once more with the check
disabled (`max_weight_bytes=None`), in a child process capped at `--before-memory` GiB of
address space, and reports how it ended (a MemoryError, the cap, or success) and after how long:
that is the cost the refusal saves. It takes minutes and GiBs; leave it off on a shared machine.

    python -m benchmarks.refusal
    python -m benchmarks.refusal --repeats 9 --before --before-memory 8
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
import warnings

from compiler.compiling import compile_rasp
from compiler.errors import ModelSizeError
from compiler.examples import EXAMPLES

# (name, example, vocabulary size, max_seq_len)
CASES = (
    ("hist, 100,000 tokens", "hist", 100_000, 5),
    ("length, max_seq_len 10,000", "length", 3, 10_000),
    ("sort_unique, 30,000 tokens", "sort_unique", 30_000, 5),
)


def _arguments(example: str, size: int, max_seq_len: int) -> tuple:
    entry = EXAMPLES[example]
    return entry.build(max_seq_len), entry.scaled_vocab(size), max_seq_len


def refusal(example: str, size: int, max_seq_len: int) -> tuple[float, ModelSizeError]:
    """Seconds until `compile_rasp` refuses the case (building the program and vocab excluded)."""
    program, vocab, n = _arguments(example, size, max_seq_len)
    start = time.perf_counter()
    try:
        compile_rasp(program, vocab, n)
    except ModelSizeError as error:
        return time.perf_counter() - start, error
    raise AssertionError(f"{example} at {size}/{max_seq_len} was not refused")


_CHILD = """
import resource, sys, time, warnings
warnings.simplefilter("ignore")
from benchmarks.refusal import _arguments
from compiler.compiling import compile_rasp
limit = int(float(sys.argv[4]) * 2**30)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
program, vocab, n = _arguments(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
start = time.perf_counter()
try:
    compile_rasp(program, vocab, n, max_weight_bytes=None)
    outcome = "compiled"
except MemoryError as error:
    outcome = "MemoryError"
print(f"{time.perf_counter() - start:.1f} {outcome}", flush=True)
"""


def before(example: str, size: int, max_seq_len: int, memory_gib: float, timeout: float) -> str:
    """How the case ends without the check, in a child capped at `memory_gib` GiB."""
    command = [sys.executable, "-c", _CHILD, example, str(size), str(max_seq_len), str(memory_gib)]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"still running after {timeout:.0f} s"
    if done.returncode == 0 and done.stdout.strip():
        seconds, outcome = done.stdout.split()
        return f"{outcome} after {seconds} s"
    return f"died (exit {done.returncode}) after {time.perf_counter() - start:.1f} s"


def floor(repeats: int) -> float:
    """Median seconds to compile hist over 3 tokens (the smallest useful compile)."""
    program, vocab, n = _arguments("hist", 3, 5)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        compile_rasp(program, vocab, n)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--before", action="store_true", help="also run each case without the check")
    parser.add_argument("--before-memory", type=float, default=8.0, metavar="GIB")
    parser.add_argument("--before-timeout", type=float, default=300.0, metavar="S")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    base = floor(args.repeats)
    print(f"floor: compiling hist over 3 tokens takes {base * 1000:.0f} ms (median of {args.repeats})\n")
    header = f"{'case':30s} {'refused in (median)':>20s} {'x floor':>8s} {'estimate':>10s}  largest s-op"
    if args.before:
        header += "   without the check"
    print(header)
    for name, example, size, max_seq_len in CASES:
        times, error = [], None
        for _ in range(args.repeats):
            seconds, error = refusal(example, size, max_seq_len)
            times.append(seconds)
        median = statistics.median(times)
        line = (
            f"{name:30s} {median * 1000:17.0f} ms {median / base:8.1f} "
            f"{error.estimated_bytes / 2**30:7.2f} GiB  {error.label}"
        )
        if args.before:
            line += "   " + before(example, size, max_seq_len, args.before_memory, args.before_timeout)
        print(line, flush=True)
    print(f"\n(peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB)")


if __name__ == "__main__":
    main()
