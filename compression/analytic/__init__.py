"""Analytic compression: W (D x d) built from what the compiled model reads, without training.

Modules in reading order:

* ``structure``: per residual coordinate, who writes it, who reads it and how much overlap each
  reader tolerates (read from the weights through ``compiler.model.weights``).
* ``codes``: n nearly orthogonal unit vectors in k dimensions for mutually exclusive values.
* ``packing``: the projections (orthogonal, packed, random) and the interference bound that
  certifies them.
"""

from compression.analytic.codes import exclusive_code, smallest_code
from compression.analytic.packing import (
    AnalyticReport,
    Method,
    interference_bound,
    make_projection,
    min_width,
    packed_projection,
    packed_width,
    random_projection,
)
from compression.analytic.structure import ResidualStructure, residual_structure

__all__ = [
    "AnalyticReport", "Method", "ResidualStructure", "exclusive_code", "interference_bound", "make_projection",
    "min_width", "packed_projection", "packed_width", "random_projection", "residual_structure", "smallest_code",
]
