"""Compression of compiled models: learn W (D x d) so the frozen model runs in d dimensions.

See docs/compression.md. Two ways of making W, side by side, neither importing the other:

* ``learned``: gradient descent on the frozen model (config, frozen, sampling, projection,
  losses, optim, sharding, checkpoint, train).
* ``analytic``: W built from what the model reads (structure, codes, packing).

Above them, in reading order, what compares and checks the two: ``evaluation`` (accuracy against
RASP), ``task`` (compiled library programs with their input spaces), ``exactness`` (is a W exact
on every input?), ``claims`` (a published "exact": the interference bound's proof with its
check on the model), ``width_search`` (the smallest exact width per method), ``analysis`` (cosine
similarity, PCA), ``plots`` and ``experiments`` (the scripts behind docs/compression.md).

Names are imported lazily (PEP 562). This package shares its top-level name with Python 3.14's
standard-library ``compression`` package (PEP 784), and JAX probes ``from compression import
zstd`` while it is being imported; importing JAX from here eagerly would make that probe a
circular import. Kept lazy, the probe just fails with ImportError, as JAX expects on Python
< 3.14. Where the standard library has its own ``compression`` folder (3.14 and later) and this
package is the one imported (run from a clone, whose folder comes first on ``sys.path``), that
folder is appended to ``__path__``, so ``compression.zstd`` and its siblings still resolve to the
standard library's modules. An *installed* copy would be shadowed by the standard library
instead; the package therefore declares ``requires-python <3.14`` (README, "Versions").
"""

from __future__ import annotations

import importlib
import os
import sysconfig
from typing import Any


def standard_library_parts(stdlib: str | None) -> list[str]:
    """The standard library's ``compression`` folder, if it has one and it is not this one."""
    if not stdlib:
        return []
    folder = os.path.join(stdlib, "compression")
    ours = os.path.dirname(os.path.abspath(__file__))
    if os.path.isdir(folder) and os.path.abspath(folder) != ours:
        return [folder]
    return []


__path__.extend(p for p in standard_library_parts(sysconfig.get_path("stdlib")) if p not in __path__)

_EXPORTS = {
    "GDRecipe": "learned.config", "LossConfig": "learned.config", "OptimizerConfig": "learned.config",
    "SamplingConfig": "learned.config", "TrainConfig": "learned.config", "FrozenModel": "learned.frozen",
    "gram": "learned.projection", "init_projection": "learned.projection", "InputSpace": "learned.sampling",
    "Compressor": "learned.train", "TrainResult": "learned.train", "TrainState": "learned.train",
    "compress": "learned.train", "residual_structure": "analytic.structure",
    "packed_projection": "analytic.packing", "min_width": "analytic.packing",
    "Accuracy": "evaluation", "ReferenceSet": "evaluation", "accuracy": "evaluation",
    "nearest_value_tolerance": "evaluation", "CompressionTask": "task", "frac_prevs_task": "task",
    "frozen_from_compiled": "task", "make_task": "task", "sort_unique_task": "task",
    "exactness_check": "exactness", "Claim": "claims", "ClaimStatus": "claims", "claim_exactness": "claims",
    "Projected": "claims", "project": "claims", "task_of": "task",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'compression' has no attribute {name!r}")
    return getattr(importlib.import_module(f"compression.{_EXPORTS[name]}"), name)
