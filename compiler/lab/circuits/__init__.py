"""Ground-truth circuits of compiled models, the difficulty dial, and methods scored against them.

Modules, in reading order:

* ``components``: sources, ports and edges of a compiled model as a dense `Network`, named in the
  project's labels, TransformerLens hook names and auto-circuit node names.
* ``patching``: the jitted forward pass with edges weighted by a keep mask, vmapped over masks.
* ``ablation``: the input distribution and what zero / mean / resample ablation put in an edge.
* ``measure``: the circuit by patching (single-edge effects), verified for sufficiency and
  necessity, repaired where redundancy needs it.
* ``structural``: the circuit read off the weights and the program graph, with the s-ops each
  edge carries.
* ``record``: `CircuitRecord`, the frozen record and its JSON file.
* ``scoring``: ROC AUC, average precision and best-threshold F1 of any method's edge scores.
* ``methods``: reference methods: exhaustive edge patching (ACDC-style) and attribution
  patching (EAP).
* ``variants``: the difficulty dial: exact, analytic superposition, GD-compressed, distractors,
  function-preserving reparametrisations.
* ``pipeline``: one call from a program to a verified record per ablation.
* ``picture``: the circuit drawn as a wiring diagram (a lane per s-op, a tap per port).
* ``auto_circuit_bridge``: runs the auto-circuit package on the TransformerLens export.

Entry points, importable from here: `circuit_records` (a program to verified records),
`CircuitRecord` (the record and its JSON file), `InputDistribution` and `ABLATIONS` (what is
ablated and on which inputs), `score` (any method's edge scores against a record), the reference
methods (`edge_patching_scores`, `acdc_scores`, `eap_scores`, `eap_ig_scores`, `SHARP`, and
`REFERENCE_METHODS`, all of them by the names the benchmarks print), the dial
(`make_variant`, `parse_variant`, `keeps_outputs`, `Variant`), the lower layers the benchmarks
drive (`network`, `setup`, `measure_circuit`, `measured`, `record_of`), the picture (`draw`) and
the auto-circuit bridge (`run_eap`, `scores_by_edge`).
"""

from compiler.lab.circuits.ablation import ABLATIONS, Ablation, InputDistribution, check_ablation
from compiler.lab.circuits.auto_circuit_bridge import run_eap, scores_by_edge
from compiler.lab.circuits.components import Component, Edge, Network, Port, network
from compiler.lab.circuits.measure import measure_circuit, setup
from compiler.lab.circuits.methods import REFERENCE_METHODS, SHARP, acdc_scores, eap_ig_scores, eap_scores, edge_patching_scores
from compiler.lab.circuits.picture import draw
from compiler.lab.circuits.pipeline import Measurement, circuit_records, measured, record_of
from compiler.lab.circuits.record import CircuitRecord, Verification
from compiler.lab.circuits.scoring import Score, score
from compiler.lab.circuits.variants import Dial, Variant, keeps_outputs, make_variant
from compiler.lab.circuits.variants import parse as parse_variant

__all__ = [
    "ABLATIONS",
    "REFERENCE_METHODS",
    "SHARP",
    "Ablation",
    "CircuitRecord",
    "Component",
    "Dial",
    "Edge",
    "InputDistribution",
    "Measurement",
    "Network",
    "Port",
    "Score",
    "Variant",
    "Verification",
    "acdc_scores",
    "check_ablation",
    "circuit_records",
    "draw",
    "eap_ig_scores",
    "eap_scores",
    "edge_patching_scores",
    "keeps_outputs",
    "make_variant",
    "measure_circuit",
    "measured",
    "network",
    "parse_variant",
    "record_of",
    "run_eap",
    "score",
    "scores_by_edge",
    "setup",
]
