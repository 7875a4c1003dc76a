"""Analytic compression: W (D x d) built from what the compiled model reads, without training.

Modules in reading order:

* ``structure``: per residual coordinate, who writes it, who reads it and how much overlap each
  reader tolerates (read from the weights through ``compiler.model.weights``).
* ``codes``: n nearly orthogonal unit vectors in k dimensions for mutually exclusive values.
* ``packing``: the projections (packed, random).
* ``view``, ``readers``, ``envelope``, ``bound``: the interference bound that says whether a
  projection is exact on every input: the model's readers, how far W moves each read, what the
  compiled values can be (magnitudes, float rounding, the compiled model's own noise), and the
  walk through the sub-layers.
"""

from compression.analytic.bound import InterferenceBound, interference_bound
from compression.analytic.codes import exclusive_code, smallest_code
from compression.analytic.packing import (
    AnalyticReport,
    Method,
    make_projection,
    min_width,
    packed_projection,
    packed_width,
    random_projection,
)
from compression.analytic.structure import ResidualStructure, residual_structure

__all__ = [
    "AnalyticReport", "InterferenceBound", "Method", "ResidualStructure", "exclusive_code", "interference_bound", "make_projection",
    "min_width", "packed_projection", "packed_width", "random_projection", "residual_structure", "smallest_code",
]
