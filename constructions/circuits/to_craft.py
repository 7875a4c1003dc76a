"""Circuit weights of Craft attention blocks, over a labelled residual basis.

Every Craft head becomes a :class:`~constructions.circuits.attention_only.HeadWeights` whose rows/columns are
the residual directions, so the analysis of :mod:`constructions.circuits.attention_only` applies unchanged and
its tables can be read with direction labels.  Explicit factors (``w_q``/``w_k``, ``w_v``/``w_o``)
are kept when a head has them; otherwise the full matrix sits on one side.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from constructions.circuits.attention_only import HeadWeights
from craft.bases import VectorSpaceWithBasis
from craft.blocks import AttentionHead, MultiAttentionHead, SeriesWithResiduals, heads_of


def _embed_rows(matrix: np.ndarray, space: VectorSpaceWithBasis,
                residual: VectorSpaceWithBasis) -> np.ndarray:
    """Rows indexed by ``space``'s directions, placed on the residual's rows (zeros elsewhere)."""
    out = np.zeros((residual.num_dims, matrix.shape[1]))
    out[residual.indices(space.basis)] = matrix
    return out


def head_weights(head: AttentionHead, residual: VectorSpaceWithBasis, name: str) -> HeadWeights:
    """Residual-basis factors of one Craft head."""
    left, right = head.w_qk.left_space, head.w_qk.right_space
    if head.w_q is not None:
        assert head.w_k is not None  # an AttentionHead has both factors or neither
        w_q = _embed_rows(head.w_q, left, residual)
        w_k = _embed_rows(head.w_k, right, residual)
    else:
        w_q = _embed_rows(head.w_qk.matrix, left, residual)
        w_k = _embed_rows(np.eye(right.num_dims), right, residual)
    source, target = head.w_ov.input_space, head.w_ov.output_space
    if head.w_v is not None:
        assert head.w_o is not None  # an AttentionHead has both factors or neither
        w_v = _embed_rows(head.w_v, source, residual)
        w_o = _embed_rows(head.w_o.T, target, residual).T
    else:
        w_v = _embed_rows(head.w_ov.matrix, source, residual)
        w_o = _embed_rows(np.eye(target.num_dims), target, residual).T
    return HeadWeights(name, w_q, w_k, w_v, w_o)


def attention_layers(model: SeriesWithResiduals | Sequence, residual: VectorSpaceWithBasis
                     ) -> tuple[tuple[HeadWeights, ...], ...]:
    """Heads of every attention block in order, named ``L{i}H{h}`` (i counts attention blocks).

    Non-attention blocks are skipped: the result is only a full model for attention-only series.
    """
    blocks = model.blocks if isinstance(model, SeriesWithResiduals) else tuple(model)
    layers: list[tuple[HeadWeights, ...]] = []
    for block in blocks:
        if isinstance(block, (AttentionHead, MultiAttentionHead)):
            i = len(layers)
            layers.append(tuple(head_weights(h, residual, f"L{i}H{j}")
                                for j, h in enumerate(heads_of(block))))
    return tuple(layers)
