"""Transformer blocks over labelled spaces, each runnable in plain numpy.

Vectors given to `apply` have shape (..., positions, dims): optional batch axes, then the
sequence axis (position 0 is BOS), then the basis axis. Semantics match the compiled
transformer exactly: attention is a plain softmax of `q @ W_QK @ k` (no 1/sqrt(d) scaling; all
scale lives in the weights), optionally causal; MLPs are `act(x @ W1) @ W2` without biases (a
bias is a weight from the `one` direction); `SeriesWithResiduals` adds each block's output to the
residual stream.

MLP activations (the string field `activation`):
  * "relu", "square" (`h**2`), "identity": applied elementwise to the hidden vector `h = x @ W1`.
  * "bilinear" (gated / GLU form): the hidden space of `first` has an even number 2k of
    directions; the activation is `h[:k] * h[k:]` (first half times second half, in the hidden
    basis' stored order), and `second.input_space` must be exactly the first half of the hidden
    basis (same directions, same order): the product lands on the first-half directions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Union

import numpy as np

from craft.bases import VectorInBasis, VectorSpaceWithBasis, direct_sum, join_vector_spaces
from craft.maps import BilinearMap, FactoredBilinearMap, LinearMap, right_multiply, sum_matrices, to_dense
from craft.numerics import softmax

ACTIVATIONS = ("relu", "square", "identity", "bilinear")


def activate(name: str, hidden):
    """Apply the named activation to `hidden` (last axis = hidden units).

    Written with array operators only, so the same function serves numpy (Craft) and JAX (the
    compiled model, traced and differentiated): the two can never disagree on an activation.
    """
    if name == "relu":
        return hidden * (hidden > 0)
    if name == "square":
        return hidden * hidden
    if name == "identity":
        return hidden
    if name == "bilinear":
        half = hidden.shape[-1] // 2
        return hidden[..., :half] * hidden[..., half:]
    raise ValueError(f"unknown activation {name!r}; expected one of {ACTIVATIONS}")


@dataclasses.dataclass(frozen=True, eq=False)
class MLP:
    """Two linear maps with an elementwise (or gated) nonlinearity between them."""

    first: LinearMap
    second: LinearMap
    activation: str = "relu"

    def __post_init__(self) -> None:
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; expected one of {ACTIVATIONS}")
        hidden = self.first.output_space
        if self.activation == "bilinear":
            if hidden.num_dims % 2:
                raise ValueError("bilinear MLP needs an even number of hidden directions")
            expected = hidden.basis[: hidden.num_dims // 2]
        else:
            expected = hidden.basis
        if self.second.input_space.basis != expected:
            raise ValueError(
                "MLP: second.input_space must equal first.output_space"
                + (" (first half, for bilinear)" if self.activation == "bilinear" else "")
            )

    @property
    def input_space(self) -> VectorSpaceWithBasis:
        return self.first.input_space

    @property
    def output_space(self) -> VectorSpaceWithBasis:
        return self.second.output_space

    @property
    def hidden_space(self) -> VectorSpaceWithBasis:
        return self.first.output_space

    def apply(self, vector: VectorInBasis) -> VectorInBasis:
        hidden = right_multiply(vector.project(self.input_space).magnitudes, self.first.matrix)
        out = right_multiply(activate(self.activation, hidden), self.second.matrix)
        return VectorInBasis(self.output_space.basis, out)

    @staticmethod
    def combine_in_parallel(mlps: Sequence[MLP]) -> MLP:
        """One MLP computing the sum of the given MLPs' outputs (hidden spaces must be disjoint)."""
        if not mlps:
            raise ValueError("combine_in_parallel needs at least one MLP")
        activation = mlps[0].activation
        if any(m.activation != activation for m in mlps):
            raise ValueError("cannot merge MLPs with different activations")
        input_space = join_vector_spaces(*(m.input_space for m in mlps))
        output_space = join_vector_spaces(*(m.output_space for m in mlps))
        if activation == "bilinear":
            firsts = direct_sum(*(m.second.input_space for m in mlps))
            seconds = direct_sum(
                *(
                    VectorSpaceWithBasis(m.hidden_space.basis[m.hidden_space.num_dims // 2 :])
                    for m in mlps
                )
            )
            hidden = direct_sum(firsts, seconds)
            read_space = firsts
        else:
            hidden = direct_sum(*(m.hidden_space for m in mlps))
            read_space = hidden
        w1 = sum_matrices(
            [m.first.on_spaces(input_space, hidden).matrix for m in mlps], (input_space.num_dims, hidden.num_dims)
        )
        w2 = sum_matrices(
            [m.second.on_spaces(read_space, output_space).matrix for m in mlps],
            (read_space.num_dims, output_space.num_dims),
        )
        return MLP(
            LinearMap(input_space, hidden, w1),
            LinearMap(read_space, output_space, w2),
            activation,
        )


@dataclasses.dataclass(frozen=True, eq=False)
class AttentionHead:
    """One attention head: scores from `w_qk` (query = left space), values through `w_ov`.

    Optional explicit factors, kept verbatim by the assembler instead of a default factorisation:
    `w_q` (left dims x d_qk) and `w_k` (right dims x d_qk) with `w_q @ w_k.T == w_qk.matrix`;
    `w_v` (w_ov input dims x d_vo) and `w_o` (d_vo x w_ov output dims) with
    `w_v @ w_o == w_ov.matrix`. Rows/columns follow the spaces' basis order. The products are
    checked at construction (relative tolerance `factor_rtol`); when a construction uses an
    approximate factorisation, it passes the product itself as `w_qk`/`w_ov`, so `apply` and the
    compiled model agree.
    """

    w_qk: BilinearMap | FactoredBilinearMap
    w_ov: LinearMap
    causal: bool = False
    w_q: np.ndarray | None = None
    w_k: np.ndarray | None = None
    w_v: np.ndarray | None = None
    w_o: np.ndarray | None = None
    factor_rtol: float = 1e-6

    def __post_init__(self) -> None:
        self._check_factors("w_q", "w_k", self.w_q, self.w_k, lambda: self.w_qk.matrix, transpose=True)
        self._check_factors("w_v", "w_o", self.w_v, self.w_o, lambda: self.w_ov.matrix, transpose=False)

    def _check_factors(self, a_name, b_name, a, b, full_matrix, transpose: bool) -> None:
        if (a is None) != (b is None):
            raise ValueError(f"AttentionHead: give both {a_name} and {b_name} or neither")
        if a is None:
            return
        full = to_dense(full_matrix())
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        object.__setattr__(self, a_name, a)
        object.__setattr__(self, b_name, b)
        product = a @ (b.T if transpose else b)
        if product.shape != full.shape:
            raise ValueError(f"AttentionHead: {a_name}/{b_name} product shape {product.shape} != {full.shape}")
        scale = max(float(np.abs(full).max(initial=0.0)), 1.0)
        if not np.allclose(product, full, rtol=0.0, atol=self.factor_rtol * scale):
            raise ValueError(f"AttentionHead: {a_name}/{b_name} do not multiply to the full matrix")

    @property
    def input_space(self) -> VectorSpaceWithBasis:
        return join_vector_spaces(self.w_qk.left_space, self.w_qk.right_space, self.w_ov.input_space)

    @property
    def output_space(self) -> VectorSpaceWithBasis:
        return self.w_ov.output_space

    def attention_pattern(self, vector: VectorInBasis) -> np.ndarray:
        """Softmax weights (..., query position, key position)."""
        scores = self.w_qk.scores(vector, vector)
        if not self.causal:
            return softmax(scores)
        n = scores.shape[-1]
        return softmax(scores, where=np.tril(np.ones((n, n), dtype=bool)))

    def apply(self, vector: VectorInBasis) -> VectorInBasis:
        values = self.w_ov.apply(vector).magnitudes
        return VectorInBasis(self.output_space.basis, self.attention_pattern(vector) @ values)

    def heads(self) -> tuple[AttentionHead, ...]:
        """This head alone (same interface as MultiAttentionHead.heads)."""
        return (self,)


@dataclasses.dataclass(frozen=True, eq=False)
class MultiAttentionHead:
    """Heads that read the same residual stream in parallel; their outputs add.

    Constructed as `MultiAttentionHead(heads)`; nested MultiAttentionHeads are flattened, so
    `.heads()` returns a tuple of AttentionHead in the given order (Tracr-style method).
    """

    sub_heads: tuple[AttentionHead, ...]

    def __post_init__(self) -> None:
        flat = tuple(h for block in self.sub_heads for h in heads_of(block))
        if not flat:
            raise ValueError("MultiAttentionHead needs at least one head")
        object.__setattr__(self, "sub_heads", flat)

    def heads(self) -> tuple[AttentionHead, ...]:
        return self.sub_heads

    @property
    def input_space(self) -> VectorSpaceWithBasis:
        return join_vector_spaces(*(h.input_space for h in self.sub_heads))

    @property
    def output_space(self) -> VectorSpaceWithBasis:
        return join_vector_spaces(*(h.output_space for h in self.sub_heads))

    def apply(self, vector: VectorInBasis) -> VectorInBasis:
        space = self.output_space
        total = np.zeros(vector.shape[:-1] + (space.num_dims,))
        for head in self.sub_heads:
            total += head.apply(vector).project(space).magnitudes
        return VectorInBasis(space.basis, total)


def heads_of(block: AttentionHead | MultiAttentionHead) -> tuple[AttentionHead, ...]:
    """The individual heads of an attention block."""
    if isinstance(block, AttentionHead):
        return (block,)
    if isinstance(block, MultiAttentionHead):
        return block.sub_heads
    raise TypeError(f"not an attention block: {type(block).__name__}")


Block = Union[MLP, AttentionHead, MultiAttentionHead, "SeriesWithResiduals"]


@dataclasses.dataclass(frozen=True, eq=False)
class SeriesWithResiduals:
    """Blocks applied one after another, each adding its output to the residual stream."""

    blocks: tuple[Block, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "blocks", tuple(self.blocks))

    @property
    def input_space(self) -> VectorSpaceWithBasis:
        return join_vector_spaces(
            *(b.input_space for b in self.blocks), *(b.output_space for b in self.blocks)
        )

    output_space = input_space

    def apply(self, vector: VectorInBasis) -> VectorInBasis:
        """Run the blocks on the residual stream; returns the final stream (input directions
        not used by any block are carried through unchanged)."""
        space = join_vector_spaces(self.input_space, vector.space)
        stream = vector.project(space)
        for block in self.blocks:
            stream = stream + block.apply(stream).project(space)
        return stream


def combine_in_parallel(blocks: Sequence[Block]) -> MLP | MultiAttentionHead:
    """Merge blocks of one layer: MLPs into one MLP, heads into one MultiAttentionHead."""
    mlps = [b for b in blocks if isinstance(b, MLP)]
    if blocks and len(mlps) == len(blocks):
        return MLP.combine_in_parallel(mlps)
    heads = [b for b in blocks if isinstance(b, (AttentionHead, MultiAttentionHead))]
    if blocks and len(heads) == len(blocks):
        return MultiAttentionHead(tuple(h for block in heads for h in heads_of(block)))
    raise ValueError("combine_in_parallel takes only MLPs or only attention heads")
