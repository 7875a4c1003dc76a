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
* ``picture``: the circuit drawn over the component graph.
* ``auto_circuit_bridge``: runs the auto-circuit package on the TransformerLens export.
"""

__all__: list[str] = []
