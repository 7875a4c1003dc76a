"""Compile every library example at growing sizes and print a table.

Per example and setting (vocabulary size / max_seq_len): compile time in a cold process (the
first `compile_rasp` call after imports, in a fresh interpreter) and warm (median of repeated
calls), residual width, layers, heads, widest MLP, parameters (stored and non-zero), forward time
for a batch of 64 full-length inputs (median, after jit; `first_s`: the ahead-of-time compilation
of that forward pass, `CompiledModel.warmup`), and the fraction of 200 random inputs
whose decoded output equals the RASP evaluator's. All of these are for the default, optimised
compilation; `layers0`, `width0` and `nz0` are the layers, residual width and non-zero weights
of the same program compiled with `optimize=False` (one block per s-op).

    python benchmarks/compile.py                  # sizes 5, 10, 25, 50
    python benchmarks/compile.py --sizes 25,100 --no-cold
    python benchmarks/compile.py --sizes 25 --examples sort,hist --no-cold
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compiler import CompilerError, compile_rasp
from compiler.examples import EXAMPLES
from compiler.model.agree import same_value
from compiler.model.config import AttentionSpec, MLPSpec
from compiler.model.weights import parameter_counts
from rasp import rasp

COLD_SNIPPET = """
import sys, time
sys.path.insert(0, {root!r})
from compiler import compile_rasp
from compiler.examples import EXAMPLES
example = EXAMPLES[{name!r}]
program = example.build({n})
start = time.perf_counter()
compile_rasp(program, example.scaled_vocab({size}), {n})
print(time.perf_counter() - start)
"""


def cold_compile_seconds(name: str, size: int, n: int, timeout: float) -> float | None:
    code = COLD_SNIPPET.format(root=str(ROOT), name=name, size=size, n=n)
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    return float(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None


def median_seconds(action, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def match_fraction(model, program, vocab, n: int, count: int = 200, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    inputs = [[vocab[i] for i in rng.integers(len(vocab), size=rng.integers(1, n + 1))] for _ in range(count)]
    decoded = model.apply_batch([["BOS"] + x for x in inputs])
    matched = total = 0
    for tokens, out in zip(inputs, decoded):
        try:
            expected = rasp.evaluate(program, tokens)
        except rasp.RaspEvaluationError:
            continue
        total += 1
        matched += len(out) - 1 == len(expected) and all(map(same_value, out[1:], expected))
    return matched / total if total else float("nan")


def measure(name: str, size: int, cold: bool, timeout: float) -> dict:
    example = EXAMPLES[name]
    n = size
    vocab = example.scaled_vocab(size)
    program = example.build(n)
    row: dict = {"example": name, "setting": f"{len(vocab)}/{n}"}
    try:
        model = compile_rasp(program, vocab, n)
    except CompilerError as error:
        row["note"] = f"refused: {str(error).splitlines()[0][:60]}"
        return row
    row["warm_s"] = median_seconds(lambda: compile_rasp(program, vocab, n), 5)
    row["cold_s"] = cold_compile_seconds(name, size, n, timeout) if cold else None
    config = model.config
    row["width"] = config.residual_width
    row["layers"] = config.num_layers
    row["heads"] = sum(len(layer.heads) for layer in config.layers if isinstance(layer, AttentionSpec))
    row["mlp"] = max((layer.w_in.shape[1] for layer in config.layers if isinstance(layer, MLPSpec)), default=0)
    row["params"], row["nonzero"] = parameter_counts(model)
    rng = np.random.default_rng(1)
    batch = [["BOS"] + [vocab[i] for i in rng.integers(len(vocab), size=n)] for _ in range(64)]
    ids = model.input_encoder.encode_batch(batch)
    row["first_s"] = model.warmup(64)
    jax.block_until_ready(model.run(ids).output)
    row["fwd64_ms"] = 1e3 * median_seconds(lambda: jax.block_until_ready(model.run(ids).output), 5)
    row["match"] = match_fraction(model, program, vocab, n)
    try:
        plain = compile_rasp(program, vocab, n, optimize=False)
    except CompilerError:
        return row
    row["layers0"] = plain.config.num_layers
    row["width0"] = plain.config.residual_width
    row["nz0"] = parameter_counts(plain)[1]
    return row


COLUMNS = (  # (key, width, format of a value)
    ("example", 16, "{:<16}"), ("setting", 7, "{:>7}"), ("cold_s", 7, "{:>7.3f}"),
    ("warm_s", 7, "{:>7.3f}"), ("width", 6, "{:>6}"), ("layers", 6, "{:>6}"), ("heads", 5, "{:>5}"),
    ("mlp", 6, "{:>6}"), ("params", 9, "{:>9}"), ("nonzero", 9, "{:>9}"),
    ("first_s", 7, "{:>7.2f}"), ("fwd64_ms", 9, "{:>9.2f}"), ("match", 6, "{:>6.1%}"), ("layers0", 7, "{:>7}"),
    ("width0", 6, "{:>6}"), ("nz0", 9, "{:>9}"),
)


def format_row(row: dict) -> str:
    cells = [
        fmt.format(row[key]) if row.get(key) is not None else "-".rjust(width)
        for key, width, fmt in COLUMNS
    ]
    return " ".join(cells) + (f"  {row['note']}" if "note" in row else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="5,10,25,50", help="comma list of vocab size = max_seq_len")
    parser.add_argument("--examples", default=",".join(EXAMPLES), help="comma list of example names")
    parser.add_argument("--no-cold", dest="cold", action="store_false", help="skip cold-process timing")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds allowed per cold compile")
    args = parser.parse_args(argv)
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; times are medians")
    print(" ".join(key.ljust(width) if key == "example" else key.rjust(width) for key, width, _ in COLUMNS))
    for size in (int(s) for s in args.sizes.split(",")):
        for name in args.examples.split(","):
            print(format_row(measure(name, size, args.cold, args.timeout)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
