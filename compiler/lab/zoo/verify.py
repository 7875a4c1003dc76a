"""A record's circuit checked on the record's own model by activation patching.

`check_circuit(net, circuit, ids)` runs `compiler.lab.circuits.measure` on the variant's network
(the stored weights; for a projected variant `network(model, W)`, which differs from the folded
tensors by float32 rounding) over the record's inputs, under every ablation of
`compiler.lab.circuits.ablation.ABLATIONS`, and reports, per ablation:

* whether the record's circuit is **sufficient** there: ablating every edge outside it at once
  leaves every decoded output unchanged (`circuit_outside_changes` 0);
* `circuit_unneeded`: edges of the record's circuit whose ablation alone changes no output on
  these inputs (a structural edge can carry a direction that is constant over them);
* the **measured** circuit, the circuit issue's definition (`measure_circuit`): every edge whose
  ablation alone changes an output (repaired where redundant paths need it), with the number of
  outputs each changes, and its verification (sufficient, every edge necessary, minimal).

For the exact variants this confirms what the weights say; for `reparametrised`, `compressed` and
`gd`, whose circuit is carried over from the optimised model, it is the check that the carried
circuit holds on the changed weights. Each network is compiled once by JAX (about a second or
more per record), which is why exact variants are checked only on request
(`ZooConfig.measure_circuits`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compiler.errors import LabError
from compiler.lab.circuits.ablation import ABLATIONS
from compiler.lab.circuits.components import Network
from compiler.lab.circuits.measure import measure_circuit, outside_changes, setup


def check_circuit(net: Network, circuit: np.ndarray, ids: np.ndarray) -> dict[str, Any]:
    """The record's circuit and the measured circuit of `net` on `ids`, per ablation.

    Args:
      net: the network of the record's weights.
      circuit: `[len(net.edges)]` bool, the record's circuit over `net.edges`.
      ids: the record's inputs as token ids `[B, T]` (BOS first, PAD after the end).
    Returns:
      JSON data: `inputs`, `scored_outputs` and, under `ablations`, one entry per ablation
      (see the module docstring).
    Raises:
      LabError: `circuit` does not have one entry per edge of `net`.
    """
    circuit = np.asarray(circuit, bool)
    if circuit.shape != (len(net.edges),):
        raise LabError(f"circuit has {circuit.shape} entries; the network has {len(net.edges)} edges")
    names = [edge.name for edge in net.edges]
    out: dict[str, Any] = {"inputs": int(len(ids)), "ablations": {}}
    for ablation in ABLATIONS:
        s = setup(net, ids, ablation)
        measured = measure_circuit(s)
        outside = outside_changes(s, circuit)
        out["scored_outputs"] = int(np.asarray(s.scored).sum())
        out["ablations"][ablation] = {
            "circuit_sufficient": outside == 0,
            "circuit_outside_changes": outside,
            "circuit_unneeded": [names[e] for e in np.nonzero(circuit & (measured.effect == 0))[0]],
            "measured": [[names[e], int(measured.effect[e])] for e in np.nonzero(measured.circuit)[0]],
            "measured_outside_circuit": [names[e] for e in np.nonzero(measured.circuit & ~circuit)[0]],
            "measured_sufficient": measured.sufficient,
            "measured_necessary": measured.all_necessary,
            "measured_minimal": measured.minimal,
            "how_found": measured.how_found,
        }
    return out
