"""Circuits that act on rare inputs: every method scored on datasets smaller than the ground truth's.

The ground truth of a program is measured and verified on `--inputs` sampled inputs (48); each
method (single-edge patching at sharpness 1 and SHARP, ACDC, EAP) then scores the edges from
the first n of them, for each n in `--method-inputs`. A program whose circuit only acts on a
rare input pattern (library `detect_abc`: "a b c" occurs in few random inputs) has a ground
truth that a method run on a dataset without the pattern cannot see. The table gives, per
variant, ablation and n, the ROC AUC of each method and the best of them; the header says how
many of the n inputs produce the program's rarest output value (for detect_abc: True).

Run: `python benchmarks/circuit_rare_inputs.py --example detect_abc --max-seq-len 5 --variants a,e,g`
(`--json PATH` also saves the table with its command and machine: benchmarks/results.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from benchmarks.results import Table, add_json_argument, publish
from compiler.examples import EXAMPLES
from compiler.lab.circuits import (
    REFERENCE_METHODS,
    InputDistribution,
    keeps_outputs,
    make_variant,
    measured,
    score,
    setup,
)
from rasp import rasp


def rare_value_inputs(program, rows) -> tuple[str, list[bool]]:
    """The rarest output value over `rows` and, per input, whether the program outputs it."""
    outputs = [[repr(v) for v in rasp.evaluate(program, row)] for row in rows]
    values = [v for out in outputs for v in out]
    rarest = min(sorted(set(values)), key=values.count)
    return rarest, [rarest in out for out in outputs]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--example", default="detect_abc", help="library program (default detect_abc)")
    parser.add_argument("--max-seq-len", type=int, default=5)
    parser.add_argument("--variants", default="a,e,g", help="variants of the dial (default a,e,g)")
    parser.add_argument("--inputs", type=int, default=48, help="sampled inputs of the ground truth (default 48)")
    parser.add_argument("--method-inputs", default="12,24,48", help="dataset sizes the methods see (default 12,24,48)")
    parser.add_argument("--seed", type=int, default=0)
    add_json_argument(parser)
    args = parser.parse_args(argv)
    example = EXAMPLES[args.example]
    program, vocab, n = example.build(args.max_seq_len), tuple(example.vocab), args.max_seq_len
    distribution = InputDistribution(args.inputs, args.seed)
    rows = distribution.tokens(vocab, n)
    rarest, odd = rare_value_inputs(program, rows)
    sizes = [int(k) for k in args.method_inputs.split(",")]
    caption = (f"{args.example} at length {n}: {sum(odd)} of {len(rows)} sampled inputs output its rarest value {rarest}; "
               "in the first " + ", ".join(f"{k}: {sum(odd[:k])}" for k in sizes) + ".")
    columns = ("variant", "ablation", "circuit / edges", "verified", "keeps outputs", "inputs",
               *(f"AUROC {m}" for m in REFERENCE_METHODS), "best")
    table_rows = []
    for variant in args.variants.split(","):
        built = make_variant(variant, program, vocab, n, seed=args.seed)
        keeps = keeps_outputs(built, program, rows)
        for m in measured(built, program, distribution):
            truth = m.measured.circuit
            for k in sizes:
                s = m.setup if k >= args.inputs else setup(built.net, np.asarray(m.setup.ids)[:k], m.setup.ablation)
                aucs = [score(run(s), truth).roc_auc for run in REFERENCE_METHODS.values()]
                table_rows.append((variant, str(m.record.ablation), f"{int(truth.sum())} / {truth.size}",
                                   str(m.record.verification.verified), f"{keeps:.3f}", str(k),
                                   *(f"{a:.3f}" for a in aucs), f"{max(aucs):.3f}"))
                print("  " + " | ".join(table_rows[-1]), flush=True)
    print()
    publish(Table(columns, tuple(table_rows), caption=caption), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
