"""Sizes of the library loops compiled with shared weights against the same loops unrolled.

For each loop program (`parity_loop`, `addition_loop`) and max_seq_len, the loop runs
`max_seq_len - 1` iterations. `loop` is `compile_rasp(loop)` (one tied block, run `steps`
times); `unrolled` is `compile_rasp(loop.unrolled())` (the body written out in Python, a fresh
block per iteration, the graph optimisation passes on). Columns: stored parameters and non-zero
ones, stored layers and layers executed per forward pass, the residual width (d_model), the
model file's bytes (`compiler.io.files.model_bytes`, dense and sparse storage) and the compile seconds
(one run each: timings on a shared machine are noisy, the sizes are exact). The last column
checks that both models decode the same outputs on 50 random inputs. `--loop-only PROGRAM:N`
(or `N` for every program) compiles only the loop of PROGRAM at sizes >= N (the unrolled addition
at 64 would store about half a GB); its loop row then checks the loop against the RASP evaluator
on the same 50 inputs instead, and its unrolled row says "not run".

    python benchmarks/loops.py --sizes 16 32 64 --loop-only addition_loop:64
    python benchmarks/loops.py --sizes 16 32 --programs parity_loop

(`--json PATH` also saves the table with its command and machine: benchmarks/results.py.)
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.results import Table, add_json_argument, publish
from compiler.compiling import compile_rasp
from compiler.examples import LOOP_EXAMPLES
from compiler.io.files import model_bytes
from compiler.model.weights import parameter_counts
from rasp.expressions import Loop

PROGRAMS = tuple(LOOP_EXAMPLES)
COLUMNS = ("program", "n", "compile", "params", "nonzero", "layers", "executed", "d_model", "dense file", "sparse file", "s")
HEADERS = ("program", "max_seq_len", "compile", "parameters", "non-zero", "layers stored", "layers run", "d_model",
           "file (dense)", "file (sparse)", "compile s", "same outputs")
NUMBERS = ("params", "nonzero", "dense file", "sparse file")  # printed with thousands separators


def measure(name: str, max_seq_len: int, unrolled: bool) -> tuple[dict, object]:
    """One row of the table, and the model (to compare outputs)."""
    example = LOOP_EXAMPLES[name]
    loop = example.build(max_seq_len)
    if not isinstance(loop, Loop):
        raise TypeError(f"{name} builds a {type(loop).__name__}, not a Loop")
    program = loop.unrolled() if unrolled else loop
    start = time.perf_counter()
    model = compile_rasp(program, set(example.vocab), max_seq_len)
    seconds = time.perf_counter() - start
    stored, nonzero = parameter_counts(model)
    row = {
        "program": name,
        "n": max_seq_len,
        "compile": "unrolled" if unrolled else "loop",
        "params": stored,
        "nonzero": nonzero,
        "layers": model.config.num_layers,
        "executed": model.config.num_executed_layers,
        "d_model": model.config.residual_width,
        "dense file": len(model_bytes(model)),
        "sparse file": len(model_bytes(model, storage="sparse")),
        "s": f"{seconds:.1f}",
    }
    return row, model


def _inputs(name: str, max_seq_len: int, count: int) -> list[list]:
    vocab = LOOP_EXAMPLES[name].vocab
    rng = random.Random(max_seq_len)
    return [["BOS", *(rng.choice(vocab) for _ in range(rng.randint(1, max_seq_len)))] for _ in range(count)]


def same_outputs(name: str, max_seq_len: int, first, second, count: int = 50) -> bool:
    """Whether both models decode the same outputs on `count` random inputs."""
    inputs = _inputs(name, max_seq_len, count)
    return first.apply_batch(inputs) == second.apply_batch(inputs)


def matches_evaluator(name: str, max_seq_len: int, model, count: int = 50) -> bool:
    """Whether the loop model decodes what the RASP evaluator computes on `count` random inputs."""
    loop = LOOP_EXAMPLES[name].build(max_seq_len)
    inputs = _inputs(name, max_seq_len, count)
    decoded = [row[1:] for row in model.apply_batch(inputs)]
    return decoded == [loop(tokens[1:]) for tokens in inputs]


def _cells(row: dict, same: str) -> tuple[str, ...]:
    """A measured row as the table prints it."""
    return (*(f"{row[key]:,}" if key in NUMBERS else str(row[key]) for key in COLUMNS), same)


def _loop_only(text: str) -> tuple[str | None, int]:
    """`PROGRAM:N` (or `N`: every program) of `--loop-only`."""
    name, _, size = text.rpartition(":")
    if name and name not in PROGRAMS:
        raise argparse.ArgumentTypeError(f"unknown loop program {name!r} (one of {', '.join(PROGRAMS)})")
    try:
        return name or None, int(size)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not PROGRAM:N or N") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 32], help="max_seq_len values")
    parser.add_argument("--programs", nargs="+", default=list(PROGRAMS), choices=PROGRAMS, help="loop programs")
    parser.add_argument("--loop-only", type=_loop_only, nargs="+", default=[], metavar="PROGRAM:N",
                        help="at max_seq_len >= N compile only the loop of PROGRAM (N alone: every program), "
                             "checked against the evaluator")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    rows: list[tuple[str, ...]] = []
    notes = []
    for name in args.programs:
        for size in args.sizes:
            loop_row, loop_model = measure(name, size, unrolled=False)
            if any(program in (None, name) and size >= limit for program, limit in args.loop_only):
                agrees = matches_evaluator(name, size, loop_model)
                rows.append(_cells(loop_row, "yes (evaluator)" if agrees else "NO (evaluator)"))
                rows.append((name, str(size), "unrolled", "not run", *("-" for _ in HEADERS[4:])))
                print(" | ".join(rows[-2]), flush=True)
                continue
            flat_row, flat_model = measure(name, size, unrolled=True)
            same = "yes" if same_outputs(name, size, loop_model, flat_model) else "NO"
            rows += [_cells(loop_row, same), _cells(flat_row, same)]
            print(" | ".join(rows[-2]) + "\n" + " | ".join(rows[-1]), flush=True)
            dense, sparse = (flat_row[key] / loop_row[key] for key in ("dense file", "sparse file"))
            notes.append(f"{name} {size}: {dense:.1f}x dense, {sparse:.1f}x sparse")
    caption = ("Loop compiled with one tied block against `compile_rasp(loop.unrolled())`; file bytes of "
               "`compiler.io.files.model_bytes`; same outputs on 50 random inputs per size. Unrolled / loop file bytes: "
               + "; ".join(notes) + ".")
    print()
    publish(Table(HEADERS, tuple(rows), timings=("compile s",), caption=caption), args.json)
    return 0 if all("NO" not in row[-1] for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
