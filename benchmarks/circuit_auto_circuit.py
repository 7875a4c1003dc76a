"""auto-circuit's edge attribution patching on the TransformerLens export, scored against our
verified resample-ablation circuit at the last position (what auto-circuit scores).

Needs the `circuits` extra (auto-circuit next to TransformerLens 3.x, in its own venv; see
docs/circuits.md): `python3 -m venv v && v/bin/pip install -e ".[circuits]" "torch==2.13.0"`, then
`v/bin/python benchmarks/circuit_auto_circuit.py [program ...] [--json PATH]` (the `all` extra
holds it too).
"""

import argparse
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from benchmarks.results import Table, add_json_argument, publish
from compiler import compile_rasp
from compiler.examples import EXAMPLES
from compiler.lab.circuits import InputDistribution, Variant, measure_circuit, network, record_of, run_eap, score, scores_by_edge, setup


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("programs", nargs="*", default=["frac_prevs", "reverse", "hist", "sort"],
                        help="library programs at length 5 (default frac_prevs reverse hist sort)")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    rows = []
    for name in args.programs:
        example = EXAMPLES[name]
        program = example.build(5)
        model = compile_rasp(program, set(example.vocab), 5)
        distribution = InputDistribution(48, min_length=5)
        ids = distribution.ids(model)
        full = setup(network(model), ids, "resample")
        last_only = dataclasses.replace(full, scored=full.scored.at[:, :-1].set(False))
        measured = measure_circuit(last_only)
        record = record_of(Variant("a", full.net, model, "exact compiled model"), program, last_only, measured, distribution)
        scores = scores_by_edge(record, run_eap(model, ids, model.output_encoder.width))
        truth = np.array([record.auto_circuit_truth()[e.auto_circuit] for e in record.edges])
        result = score(scores, truth)
        rows.append((name, str(len(record.edges)), str(int(truth.sum())), str(record.verification.verified),
                     f"{result.roc_auc:.3f}", f"{result.average_precision:.3f}", f"{result.best_f1:.3f}"))
    columns = ("program", "edges", "circuit (auto-circuit names)", "verified", "auto-circuit EAP ROC AUC", "AP", "best F1")
    publish(Table(columns, tuple(rows)), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
