"""Residual width of every library program with and without residual reuse, and how close reuse gets.

Per library example at one size (vocabulary `scaled_vocab(size)`, max_seq_len `size`): the
residual width of the default compile, the width with `reuse_residual=True`, their ratio, and the
peak (`ResidualReuse.peak_alive`: the most coordinates holding a value still to be read after any
one sub-layer, a floor no reuse of whole coordinates can go below). The last column counts the
sampled inputs (`compiler.fuzzing.differential.sample_inputs`, each length present) on which the
reused model decodes what `rasp.evaluate` returns, under the project's one agree rule. Rows are
sorted by ratio, smallest first. Loop programs are left out: a loop's iterations share one block,
which the pass does not reuse.

    python benchmarks/reuse.py                         # 25/25, 50 inputs per program
    python benchmarks/reuse.py --size 10 --examples sort,hist
    python benchmarks/reuse.py --json docs/results/data/compiling/reuse.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.results import Table, add_json_argument, publish
from compiler import compile_rasp
from compiler.examples import EXAMPLES, Example
from compiler.fuzzing.differential import run_model, sample_inputs
from compiler.model.agree import same_outputs
from rasp import rasp

COLUMNS = ("program", "width", "with reuse", "ratio", "peak", "inputs agreeing")


def measure(example: Example, size: int, inputs: int, seed: int) -> tuple[tuple[str, ...], float]:
    """One row of the table for `example` at `size`, and its ratio (the sort key)."""
    program = example.build(size)
    vocab = set(example.scaled_vocab(size))
    width = compile_rasp(program, vocab, size).residual_space.num_dims
    model = compile_rasp(program, vocab, size, reuse_residual=True)
    reuse = model.residual_reuse
    if reuse is None:
        raise RuntimeError(f"{example.name}: compile_rasp(..., reuse_residual=True) returned no ResidualReuse record")
    sample = sample_inputs(vocab, size, inputs, seed)
    agreeing = 0
    for tokens, decoded in zip(sample, run_model(model, sample, "jax")):
        try:
            expected = rasp.evaluate(program, tokens)
        except rasp.RaspEvaluationError:
            expected = None
        agreeing += expected is not None and same_outputs(decoded, expected)
    ratio = reuse.width_after / width
    row = (example.name, str(width), str(reuse.width_after), f"{ratio:.2f}", str(reuse.peak_alive), f"{agreeing}/{len(sample)}")
    return row, ratio


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=25, help="vocabulary size and max_seq_len (default 25)")
    parser.add_argument("--examples", default="", help="comma-separated library examples (default: every non-loop one)")
    parser.add_argument("--inputs", type=int, default=50, help="sampled inputs checked per program (default 50)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the input sample")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    names = [name for name in args.examples.split(",") if name] or list(EXAMPLES)
    unknown = [name for name in names if name not in EXAMPLES]
    if unknown:
        parser.error(f"unknown examples {unknown}; choose from {sorted(EXAMPLES)}")
    measured = []
    for name in names:
        measured.append(measure(EXAMPLES[name], args.size, args.inputs, args.seed))
        print(f"  {name}: {measured[-1][0][1]} -> {measured[-1][0][2]}", file=sys.stderr, flush=True)
    rows = tuple(row for row, _ in sorted(measured, key=lambda pair: pair[1]))
    caption = (f"Residual width at {args.size}/{args.size} without and with `reuse_residual=True`; peak: the most "
               f"coordinates written and still to be read after any one sub-layer, which no reuse of whole coordinates "
               f"can go below; the reused model checked against `rasp.evaluate` on {args.inputs} sampled inputs "
               f"(seed {args.seed}).")
    publish(Table(COLUMNS, rows, caption=caption), args.json)


if __name__ == "__main__":
    main()
