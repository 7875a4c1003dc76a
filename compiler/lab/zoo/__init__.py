"""Model zoos: datasets of (program, variant, weights, ground truth) records (docs/zoo.md).

Modules in reading order:

* ``config`` — ``ZooConfig``, the knobs of a run, checked up front.
* ``sampling`` — draw program ``i`` (random or library) as source text; ``rebuild`` it.
* ``variants`` — compile a program unoptimised, optimised, compressed (analytic or GD), or
  reparametrised.
* ``weights`` — the weights as dense tensors in safetensors bytes; a numpy forward over them.
* ``describe`` — the compiled graph with tabulated functions, where each s-op is computed, and
  the structural circuit.
* ``verify`` — the circuit checked on a record's own weights by activation patching.
* ``records`` — one program's rows (``SCHEMA``), failures included.
* ``shards`` — the dataset folder: ``zoo.json`` and atomically written Parquet shards.
* ``engines`` — local worker processes or Ray; per-program time and memory limits.
* ``generate`` — ``generate_zoo``, the run with its progress bar.
* ``loader`` — shards to padded batches for PyTorch or JAX meta-model training.
* ``audit`` — re-verify a published zoo from its files: every record's weights against RASP.
"""

__all__: list[str] = []
