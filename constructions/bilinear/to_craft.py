"""Bilinear layers as Craft MLPs (``activation="bilinear"``) and their labelled three-tensor.

A Craft bilinear MLP's hidden space is ``left directions + right directions`` (equal halves, in
that order); the activation multiplies them pairwise and ``second`` reads the left half.  Biases
are weights from the residual ``one`` direction, so the interaction tensor of a compiled block is
taken directly over its input basis (``one`` included) and stays valid under folding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from constructions.bilinear.gates import exact_boolean
from constructions.bilinear.layer import BilinearLayer, interaction_tensor, symmetrise
from craft.bases import BasisDirection, VectorSpaceWithBasis, direct_sum, join_vector_spaces
from craft.blocks import MLP
from craft.maps import LinearMap


def bilinear_mlp(layer: BilinearLayer, input_directions: Sequence[BasisDirection],
                 readout: np.ndarray, output_directions: Sequence[BasisDirection],
                 one_direction: BasisDirection, hidden_name: str,
                 bos_direction: BasisDirection | None = None) -> MLP:
    """Wrap ``out = ((h W + b) * (h V + c)) @ readout`` as a Craft MLP.

    ``input_directions[i]`` carries ``h_i``; biases come from ``one_direction``.  With
    ``bos_direction`` each neuron's left factor also gets ``-b`` from it, so at the BOS position
    (where only ``one`` and BOS are 1) every neuron is exactly zero.
    """
    if len(input_directions) != layer.d_in:
        raise ValueError(f"layer reads {layer.d_in} inputs, got {len(input_directions)} directions")
    k = layer.d_hidden
    left = VectorSpaceWithBasis(tuple(BasisDirection(hidden_name, ("left", o)) for o in range(k)))
    right = VectorSpaceWithBasis(tuple(BasisDirection(hidden_name, ("right", o)) for o in range(k)))
    hidden = direct_sum(left, right)
    extra = [one_direction] + ([bos_direction] if bos_direction is not None else [])
    in_space = join_vector_spaces(VectorSpaceWithBasis(tuple(input_directions)),
                                  VectorSpaceWithBasis(tuple(extra)))
    first = np.zeros((in_space.num_dims, 2 * k))
    rows = in_space.indices(input_directions)
    first[rows, :k] = layer.w
    first[rows, k:] = layer.v
    first[in_space.index(one_direction), :k] += layer.b
    first[in_space.index(one_direction), k:] += layer.c
    if bos_direction is not None:
        first[in_space.index(bos_direction), :k] -= layer.b
    out_space = VectorSpaceWithBasis(tuple(output_directions))
    readout = np.asarray(readout, dtype=np.float64).reshape(k, out_space.num_dims)
    return MLP(LinearMap(in_space, hidden, first), LinearMap(left, out_space, readout), "bilinear")


def boolean_gate_mlp(truth_table: Sequence[float], input_directions: Sequence[BasisDirection],
                     output_direction: BasisDirection, one_direction: BasisDirection,
                     hidden_name: str, bos_direction: BasisDirection | None = None) -> MLP:
    """Any boolean function of degree <= 2 (every two-input gate) with <= n+1 bilinear neurons."""
    gate = exact_boolean(truth_table)
    return bilinear_mlp(gate.layer, input_directions, gate.readout[:, None], [output_direction],
                        one_direction, hidden_name, bos_direction)


def square_as_bilinear(mlp: MLP, hidden_name: str | None = None) -> MLP:
    """The same block with ``activation="square"`` rewritten as ``(xL) * (xL)``."""
    if mlp.activation != "square":
        raise ValueError(f"expected a square-activation MLP, got {mlp.activation!r}")
    k = mlp.hidden_space.num_dims
    name = hidden_name or f"{mlp.hidden_space.basis[0].name}_bilinear"
    left = VectorSpaceWithBasis(tuple(BasisDirection(name, ("left", o)) for o in range(k)))
    right = VectorSpaceWithBasis(tuple(BasisDirection(name, ("right", o)) for o in range(k)))
    first = np.hstack([mlp.first.matrix, mlp.first.matrix])
    return MLP(LinearMap(mlp.input_space, direct_sum(left, right), first),
               LinearMap(left, mlp.output_space, mlp.second.matrix), "bilinear")


@dataclass(frozen=True)
class LabelledInteraction:
    """``tensor[p, a, b]``: output ``p`` is ``x T[p] x`` over ``input_basis`` (``one`` included)."""

    output_basis: tuple[BasisDirection, ...]
    input_basis: tuple[BasisDirection, ...]
    tensor: np.ndarray

    def symmetric(self) -> LabelledInteraction:
        return LabelledInteraction(self.output_basis, self.input_basis, symmetrise(self.tensor))

    def matrix(self, output: BasisDirection) -> np.ndarray:
        """Interaction matrix of one output direction."""
        return self.tensor[self.output_basis.index(output)]

    def entry(self, output: BasisDirection, a: BasisDirection, b: BasisDirection) -> float:
        return float(self.matrix(output)[self.input_basis.index(a), self.input_basis.index(b)])

    def evaluate(self, x: np.ndarray) -> np.ndarray:
        """Outputs for inputs given over ``input_basis`` (batched over leading axes)."""
        return np.einsum("pab,...a,...b->...p", self.tensor, x, x)


def mlp_interaction(mlp: MLP, fold_readout: bool = True) -> LabelledInteraction:
    """Three-tensor of a Craft bilinear (or square) MLP over its input basis.

    With ``fold_readout`` the output axis is the MLP's output space (``second`` folded in);
    otherwise it is the hidden (left-half) basis.
    """
    if mlp.activation == "square":
        mlp = square_as_bilinear(mlp)
    if mlp.activation != "bilinear":
        raise ValueError(f"only bilinear/square MLPs have an interaction tensor, got {mlp.activation!r}")
    k = mlp.hidden_space.num_dims // 2
    hidden_tensor = interaction_tensor(mlp.first.matrix[:, :k], mlp.first.matrix[:, k:])
    if not fold_readout:
        return LabelledInteraction(mlp.second.input_space.basis, mlp.input_space.basis,
                                   hidden_tensor)
    folded = np.einsum("oab,op->pab", hidden_tensor, mlp.second.matrix)
    return LabelledInteraction(mlp.output_space.basis, mlp.input_space.basis, folded)
