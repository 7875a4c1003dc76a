"""Sizes of the library loops compiled with shared weights against the same loops unrolled.

For each loop program (`parity_loop`, `addition_loop`) and max_seq_len, the loop runs
`max_seq_len - 1` iterations. `loop` is `compile_rasp(loop)` (one tied block, run `steps`
times); `unrolled` is `compile_rasp(loop.unrolled())` (the body written out in Python, a fresh
block per iteration, the graph optimisation passes on). Columns: stored parameters and non-zero
ones, stored layers and layers executed per forward pass, the residual width (d_model), the
model file's bytes (`compiler.io.files.model_bytes`, dense and sparse storage) and the compile seconds
(one run each: timings on a shared machine are noisy, the sizes are exact). The last column
checks that both models decode the same outputs on 50 random inputs. `--loop-only N` compiles
only the loop at sizes >= N (the unrolled addition at 64 would store about half a GB); its row
then checks the loop against the RASP evaluator on the same 50 inputs instead.

    python -m benchmarks.loops
    python -m benchmarks.loops --sizes 16 32 64 --programs parity_loop
    python -m benchmarks.loops --sizes 64 --programs addition_loop --loop-only 64
"""

from __future__ import annotations

import argparse
import random
import time

from compiler.compiling import compile_rasp
from compiler.examples import LOOP_EXAMPLES
from compiler.io.files import model_bytes
from compiler.model.weights import parameter_counts

PROGRAMS = tuple(LOOP_EXAMPLES)
COLUMNS = ("program", "n", "compile", "params", "nonzero", "layers", "executed", "d_model", "dense file", "sparse file", "s")


def measure(name: str, max_seq_len: int, unrolled: bool) -> tuple[dict, object]:
    """One row of the table, and the model (to compare outputs)."""
    example = LOOP_EXAMPLES[name]
    loop = example.build(max_seq_len)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 32], help="max_seq_len values")
    parser.add_argument("--programs", nargs="+", default=list(PROGRAMS), choices=PROGRAMS, help="loop programs")
    parser.add_argument("--loop-only", type=int, metavar="N",
                        help="at max_seq_len >= N compile only the loop (checked against the evaluator)")
    args = parser.parse_args(argv)
    print(" | ".join(COLUMNS) + " | same outputs")
    for name in args.programs:
        for size in args.sizes:
            loop_row, loop_model = measure(name, size, unrolled=False)
            if args.loop_only is not None and size >= args.loop_only:
                same = matches_evaluator(name, size, loop_model)
                print(" | ".join(str(loop_row[key]) for key in COLUMNS) + f" | {'yes' if same else 'NO'} (evaluator)",
                      flush=True)
                continue
            flat_row, flat_model = measure(name, size, unrolled=True)
            same = same_outputs(name, size, loop_model, flat_model)
            for row in (loop_row, flat_row):
                print(" | ".join(str(row[key]) for key in COLUMNS) + f" | {'yes' if same else 'NO'}", flush=True)
            dense, sparse = (flat_row[key] / loop_row[key] for key in ("dense file", "sparse file"))
            print(f"{name} n={size}: unrolled / loop file bytes = {dense:.1f}x dense, {sparse:.1f}x sparse", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
