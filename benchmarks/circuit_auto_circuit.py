"""auto-circuit's edge attribution patching on the TransformerLens export, scored against our
verified resample-ablation circuit at the last position (what auto-circuit scores).

Needs the `circuits` extra (auto-circuit next to TransformerLens 3.x, in its own venv; see
docs/circuits.md): `python3 -m venv v && v/bin/pip install -e ".[circuits]" "torch==2.13.0"`, then
`v/bin/python benchmarks/circuit_auto_circuit.py [program ...]`.
"""

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from compiler import compile_rasp
from compiler.examples import EXAMPLES
from compiler.lab.circuits import InputDistribution, Variant, measure_circuit, network, record_of, run_eap, score, scores_by_edge, setup

print("| program | edges | circuit (auto-circuit names) | verified | auto-circuit EAP ROC AUC | AP | best F1 |")
print("|---|---|---|---|---|---|---|")
for name in sys.argv[1:] or ["frac_prevs", "reverse", "hist", "sort"]:
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
    print(f"| {name} | {len(record.edges)} | {int(truth.sum())} | {record.verification.verified} | "
          f"{result.roc_auc:.3f} | {result.average_precision:.3f} | {result.best_f1:.3f} |")
