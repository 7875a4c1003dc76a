"""Blocks that carry `None` through numerical s-ops: the none flag and gating by it.

A categorical s-op is `None` where its one-hot is empty. A numerical s-op has one direction,
which cannot say "no value", so a numerical s-op that can be `None` also owns a *none flag*
direction: 1 where it is `None`, 0 where it holds a number (its value direction then holds 0),
and 0 at BOS like every s-op direction. Two constructions keep the flag as the evaluator's `None`
propagation asks (an operation with a `None` input gives `None`):

* `none_flag_mlp`: the output's flag is 1 exactly where some nullable input is `None` (an empty
  one-hot, or a set flag). With P_i the sum of input i's one-hot, F_j input j's flag and m the
  number of one-hot inputs, s = sum_i (one - P_i) + sum_j F_j - m * bos is a non-negative integer
  at every position (0 at BOS), and relu(s) - relu(s - 1) clamps it to 0/1: two hidden units.
* `gate_like_bos`: an MLP reading a numerical input whose flag is set must write nothing. Such an
  input holds 0 there, exactly as at BOS, and every MLP of the chamber already writes nothing at
  BOS through its `tokens:BOS` row; giving the flag the same row makes the flagged position look
  like BOS to the hidden units, so they are silent there too.
* `gate_by_bound`: an MLP without a BOS row (the exact linear MLP, zero in gives zero out, but
  another input may be non-zero at the flagged position) gets, on each hidden unit h, the flag
  weight -(1 + sum_d |W[d, h]| M_d), with M_d a bound on input direction d: the unit's
  pre-activation is then negative wherever the flag is set, and unchanged elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from craft.bases import BasisDirection, VectorSpaceWithBasis, join_vector_spaces
from craft.blocks import MLP
from craft.maps import LinearMap, is_sparse, to_dense


def none_flag_mlp(
    one_hot_inputs: Sequence[VectorSpaceWithBasis],
    flag_inputs: Sequence[BasisDirection],
    flag: BasisDirection,
    one: BasisDirection,
    bos: BasisDirection,
    hidden_name: str,
) -> MLP:
    """MLP writing 1 onto `flag` where any input is None (an empty one-hot or a set flag).

    Raises:
      ValueError: no inputs at all (the output could never be None through its inputs).
    """
    if not one_hot_inputs and not flag_inputs:
        raise ValueError("none_flag_mlp needs at least one nullable input")
    hidden = VectorSpaceWithBasis((BasisDirection(hidden_name, "any"), BasisDirection(hidden_name, "many")))
    input_space = join_vector_spaces(
        *one_hot_inputs, VectorSpaceWithBasis(tuple(flag_inputs)), VectorSpaceWithBasis((one, bos))
    )
    first = np.zeros((input_space.num_dims, 2))
    for space in one_hot_inputs:
        for direction in space.basis:
            first[input_space.index(direction)] -= 1.0
    for direction in flag_inputs:
        first[input_space.index(direction)] += 1.0
    count = len(one_hot_inputs)
    first[input_space.index(one)] += [count, count - 1.0]
    first[input_space.index(bos)] -= [count, count]
    out = VectorSpaceWithBasis((flag,))
    return MLP(LinearMap(input_space, hidden, first), LinearMap(hidden, out, np.array([[1.0], [-1.0]])))


def gate_like_bos(mlp: MLP, bos: BasisDirection, flags: Sequence[BasisDirection]) -> MLP:
    """`mlp` whose hidden units are silenced by each of `flags` as they are by `bos`.

    An MLP without a BOS row has no bias to silence (zero in, zero out) and is returned as is.
    """
    space = mlp.first.input_space
    if bos not in space or not flags:
        return mlp
    wider = join_vector_spaces(space, VectorSpaceWithBasis(tuple(flags)))
    matrix = mlp.first.on_spaces(wider, mlp.first.output_space).matrix
    bos_row = matrix[[wider.index(bos)]]
    for flag in flags:
        row = wider.index(flag)
        if is_sparse(matrix):
            matrix = matrix.tolil()
            matrix[[row]] = matrix[[row]] + bos_row
            matrix = matrix.tocsr()
        else:
            matrix[row] += bos_row[0]
    return MLP(LinearMap(wider, mlp.first.output_space, matrix), mlp.second, mlp.activation)


def gate_by_bound(mlp: MLP, flags: Sequence[BasisDirection], magnitude: dict[BasisDirection, float]) -> MLP:
    """`mlp` whose hidden units are silenced by each of `flags`, using bounds on its inputs.

    Args:
      mlp: a ReLU MLP.
      flags: none flag directions (0 or 1).
      magnitude: a bound on |x_d| for input directions d; directions not listed are bounded by 1
        (one-hots, `one`, flags).
    """
    space = mlp.first.input_space
    if not flags:
        return mlp
    wider = join_vector_spaces(space, VectorSpaceWithBasis(tuple(flags)))
    matrix = to_dense(mlp.first.on_spaces(wider, mlp.first.output_space).matrix).copy()
    bounds = np.array([magnitude.get(d, 1.0) for d in wider.basis])
    reach = bounds @ np.abs(matrix) + 1.0
    for flag in flags:
        matrix[wider.index(flag)] -= reach
    return MLP(LinearMap(wider, mlp.first.output_space, matrix), mlp.second, mlp.activation)
