"""Wrap construction weights as ordinary Craft blocks (docs/superposition.md, 'Placing constructions in a model').

The numpy builders produce matrices over *physical* coordinates; these helpers attach labelled
spaces so the result composes with compiled RASP blocks:

* MLP input space: the input feature space's physical directions plus ``craft.bases.ONE``,
  which carries the bias (Craft MLPs have no bias vector).
* Hidden space: ``BasisDirection(f"{name}_hidden", n)`` so parallel MLPs never collide.
* Output space: one direction ``BasisDirection(name, gate)`` per gate (basis-aligned readout), or
  the physical directions of an output :class:`FeatureSpace` (each gate written along its write
  vector, ``W_out = R @ F_out``).
* Attention heads keep explicit ``W_Q`` / ``W_K`` factors of width ``d_qk``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from constructions.superposition.features import FeatureSpace
from craft.bases import ONE, BasisDirection, VectorSpaceWithBasis
from craft.blocks import MLP, AttentionHead
from craft.maps import BilinearMap, LinearMap


def hidden_space(name: str, width: int) -> VectorSpaceWithBasis:
    """Hidden neurons of block ``name``."""
    return VectorSpaceWithBasis(tuple(BasisDirection(f"{name}_hidden", n) for n in range(width)))


def gate_space(name: str, gates: Sequence[Hashable]) -> VectorSpaceWithBasis:
    """One output direction per gate label."""
    return VectorSpaceWithBasis(tuple(BasisDirection(name, g) for g in gates))


def input_with_one(space: VectorSpaceWithBasis) -> VectorSpaceWithBasis:
    """``space`` followed by the bias direction ``one``."""
    return VectorSpaceWithBasis((*space.basis, ONE))


def boolean_mlp(inputs: FeatureSpace, w_in: np.ndarray, bias: np.ndarray, readout: np.ndarray,
                gates: Sequence[Hashable], *, name: str, activation: str = "relu",
                outputs: FeatureSpace | None = None) -> MLP:
    """An MLP ``act(x @ w_in + bias) @ readout`` on a feature space.

    ``readout`` is ``(d, G)``; with ``outputs`` given, gate ``g`` is written along
    ``outputs.write[g]`` instead of its own direction.
    """
    in_space = input_with_one(inputs.space)
    first = LinearMap(in_space, hidden_space(name, w_in.shape[1]),
                      np.vstack([w_in, np.asarray(bias)[None, :]]))
    if outputs is None:
        second = LinearMap(first.output_space, gate_space(name, gates), readout)
    else:
        if outputs.n_features != readout.shape[1]:
            raise ValueError(f"output feature space has {outputs.n_features} features, "
                             f"readout has {readout.shape[1]} gates")
        second = LinearMap(first.output_space, outputs.space, readout @ outputs.write)
    return MLP(first, second, activation)


def sfb_head(space: VectorSpaceWithBasis, w_q: np.ndarray, w_k: np.ndarray, *,
             w_ov: LinearMap | None = None, name: str = "sfb", causal: bool = False) -> AttentionHead:
    """Attention head scoring ``x_s @ W_Q @ W_K.T @ x_t`` with explicit factors of width d_qk.

    ``space`` is the residual subspace both sides read. Without ``w_ov`` the head writes nothing
    (a zero map onto ``BasisDirection(f"{name}_out")``): a pure bigram check whose pattern is the
    object of study.
    """
    w_qk = BilinearMap(space, space, w_q @ w_k.T)
    if w_ov is None:
        w_ov = LinearMap.zero(space, VectorSpaceWithBasis((BasisDirection(f"{name}_out"),)))
    return AttentionHead(w_qk, w_ov, causal=causal, w_q=w_q, w_k=w_k)
