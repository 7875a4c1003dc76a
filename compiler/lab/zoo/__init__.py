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

Entry points, importable from here: ``ZooConfig`` (with ``VARIANTS``, ``DEFAULT_VARIANTS``,
``VOCAB_KINDS``), ``generate_zoo``, ``audit_folder``, ``iterate_batches`` / ``BatchShape``,
``draw`` / ``rebuild`` and ``ZooFolderError``. They load lazily (PEP 562), like ``compiler``'s:
the shards, loader and audit need pyarrow (the ``zoo`` extra), and the CLI reads ``config``
without it.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "ZooConfig": "compiler.lab.zoo.config",
    "DEFAULT_VARIANTS": "compiler.lab.zoo.config",
    "VARIANTS": "compiler.lab.zoo.config",
    "VOCAB_KINDS": "compiler.lab.zoo.config",
    "draw": "compiler.lab.zoo.sampling",
    "rebuild": "compiler.lab.zoo.sampling",
    "generate_zoo": "compiler.lab.zoo.generate",
    "ZooFolderError": "compiler.lab.zoo.shards",
    "Status": "compiler.lab.zoo.records",
    "BatchShape": "compiler.lab.zoo.loader",
    "iterate_batches": "compiler.lab.zoo.loader",
    "audit_folder": "compiler.lab.zoo.audit",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'compiler.lab.zoo' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "DEFAULT_VARIANTS",
    "VARIANTS",
    "VOCAB_KINDS",
    "BatchShape",
    "Status",
    "ZooConfig",
    "ZooFolderError",
    "audit_folder",
    "draw",
    "generate_zoo",
    "iterate_batches",
    "rebuild",
]
