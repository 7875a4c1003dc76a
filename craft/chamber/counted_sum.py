"""The MLP that turns a mean into a sum: `mean * multiplier(count)`, exact on a one-hot count.

A sum over the keys a selector picks is their mean (an attention head) times how many it picks
(a categorical count: the selector's width, or a function of the query's index when the selector
only compares indices). Softmax attention cannot add, so the product is taken position-wise here.

Input: a numerical direction `m` with |m| < B at every real position, and the one-hot `h` of a
categorical count s-op (exactly one h_c = 1 at a real position, all 0 at BOS). For every count
value c two hidden units

    pos_c = relu( m + B h_c - B one)        neg_c = relu(-m + B h_c - B one)

are (m, 0) ... exactly: where h_c = 1 they are relu(m) and relu(-m), whose difference is m; where
h_c = 0 both pre-activations are at most |m| - B < 0. The output writes
`sum_c multiplier(c) * (pos_c - neg_c)`, i.e. `m * multiplier(count)`. At BOS (m = 0, h = 0,
one = 1) every unit is 0, so the BOS-zero invariant holds without a BOS term. Float32 rounds
`m + B - B` to within half an ulp of B, so the error is about multiplier * B * 6e-8.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import numpy as np

from craft.bases import BasisDirection, VectorSpaceWithBasis, join_vector_spaces
from craft.blocks import MLP
from craft.maps import LinearMap


def mean_times_count_mlp(
    mean_space: VectorSpaceWithBasis,
    count_space: VectorSpaceWithBasis,
    output_space: VectorSpaceWithBasis,
    multiplier: Callable[[Hashable], float],
    bound: float,
    one_space: VectorSpaceWithBasis,
    hidden_name: str,
) -> MLP:
    """MLP writing `mean * multiplier(count)` onto the one direction of `output_space`.

    Args:
      mean_space: the numerical mean's single direction.
      count_space: the categorical count's one-hot directions (one per count value).
      output_space: a single (numerical) output direction.
      multiplier: the factor for each count value (a direction's `.value`).
      bound: a number strictly above |mean| at every real position.
      one_space: the constant-one direction.
      hidden_name: name of the hidden directions (unique per node).

    Returns:
      The MLP (2 hidden units per count value).

    Raises:
      ValueError: a space of the wrong size, or a bound that is not positive and finite.
    """
    if mean_space.num_dims != 1 or output_space.num_dims != 1 or one_space.num_dims != 1:
        raise ValueError("mean_times_count_mlp: mean, output and one spaces need one direction each")
    if not (np.isfinite(bound) and bound > 0):
        raise ValueError(f"mean_times_count_mlp: bound must be positive and finite, got {bound!r}")
    counts = list(count_space.basis)
    hidden = VectorSpaceWithBasis(
        tuple(BasisDirection(hidden_name, (sign, i)) for i in range(len(counts)) for sign in ("pos", "neg"))
    )
    input_space = join_vector_spaces(mean_space, count_space, one_space)
    first = np.zeros((input_space.num_dims, hidden.num_dims))
    second = np.zeros((hidden.num_dims, 1))
    mean_row = input_space.index(mean_space.basis[0])
    one_row = input_space.index(one_space.basis[0])
    for i, direction in enumerate(counts):
        factor = float(multiplier(direction.value))
        for column, sign in ((2 * i, 1.0), (2 * i + 1, -1.0)):
            first[mean_row, column] = sign
            first[input_space.index(direction), column] = bound
            first[one_row, column] = -bound
            second[column, 0] = sign * factor
    return MLP(LinearMap(input_space, hidden, first), LinearMap(hidden, output_space, second))
