"""How large the residual stream can get: the bound a normalised model sizes its anchor by.

A pre-norm model (`compile_rasp(..., norm=...)`, `compiler.model.norm`) keeps each norm's
divisor nearly constant by writing a large constant anchor into the stream; how large depends on
how much the rest of the stream can vary. This pass bounds, from the value sets, the squared size
of the compiled coordinates at any position of any input after any sub-layer:

* an s-op's one-hot block holds one 1, or a convex mixture of its value directions (an
  attention head's average), or nothing: its squares sum to at most 1;
* a numerical s-op's direction holds one of its values (or 0): at most `max |v|` over its
  value set, bools read as 0 and 1;
* `tokens`, `indices` and `one` hold one 1 each; a selector width's scratch direction
  (`<label>_hidden_attn`) holds `1 / (w + 1)` and a none flag (`<label>_is_none`) 0 or 1.

LayerNorm's centring can only lower the squared size (`D var(x) = sum(x^2) - (sum x)^2 / D`), so
one bound serves both norms. The result is doubled, a margin for the float error of compiled
blocks (a lookup writes 1 +- 1e-7, a soft attention head leaks e^-50), which the spread
(`compiler.model.norm.norm_spec`) absorbs.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

import networkx as nx
import numpy as np

from compiler.errors import CompilerError
from compiler.passes import graph as g
from compiler.passes import nodes
from craft.bases import VectorSpaceWithBasis

# The embedded inputs and the constant, each one 1 at every position.
_EMBEDDED = ("tokens", "indices", "one")
# Scratch directions the chamber writes (selector width) and none flags, each in [0, 1].
_UNIT_SUFFIXES = ("_hidden_attn", g.NONE_SUFFIX)
# The factor the bound is multiplied by (module docstring).
MARGIN = 2.0


def _largest(name: str, values: Iterable[Hashable]) -> float:
    """The largest magnitude among numerical s-op `name`'s values (0 for none; None skipped).

    Raises:
      CompilerError: a value that is not a number.
    """
    sizes = []
    for value in values:
        if value is None:
            continue
        if not isinstance(value, (int, float, np.number)):
            raise CompilerError(f"numerical s-op {name!r} can hold {value!r}, which is not a number")
        sizes.append(abs(float(value)))
    return max(sizes, default=0.0)


def _square_bound(graph: nx.DiGraph, name: str) -> float:
    """A bound on the sum of squares of the directions named `name`.

    Raises:
      CompilerError: a direction that is no s-op, input or known scratch direction.
    """
    if name in _EMBEDDED or name.endswith(_UNIT_SUFFIXES):
        return 1.0
    if name not in graph.nodes:
        raise CompilerError(f"residual direction {name!r} is no s-op, input or scratch direction the compiler "
                            "knows a size for, so no norm can be sized for it; compile with norm=None")
    if g.is_numerical(graph, name):
        size = _largest(name, graph.nodes[name].get(nodes.VALUE_SET, ()))
        return size * size
    return 1.0


def residual_budget(graph: nx.DiGraph, residual: VectorSpaceWithBasis) -> float:
    """A bound on `sum(x_i^2)` over the residual coordinates of `residual` at any position and
    snapshot (module docstring), times `MARGIN`.

    Args:
      graph: the compiled graph, whose nodes carry the value sets.
      residual: the residual space the blocks were laid out on.
    Returns:
      The bound, a finite number of at least 0.
    Raises:
      CompilerError: a residual direction of unknown size (named).
    """
    squares = sum(_square_bound(graph, name) for name in dict.fromkeys(direction.name for direction in residual.basis))
    return MARGIN * squares


__all__ = ["MARGIN", "residual_budget"]
