"""Craft blocks laid out in sub-layers -> a runnable Haiku model: the one way to do it.

`compile_rasp` and every construction that runs its blocks in the compiler's transformer
(`constructions.common.in_model`, `constructions.facts.haiku_model`) go through
`model_from_craft`: assemble the blocks and embedding tables into weights
(`compiler.passes.assemble`), then build the jitted Haiku forward pass from them
(`compiler.model.transformer.build`). `embeddings_from_vectors` writes the embedding tables from
residual vectors, for callers that describe tokens and positions as Craft vectors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from compiler.model.transformer import ModelConfig, ModelOutput, build
from compiler.passes.assemble import Embeddings, assemble
from craft.bases import VectorInBasis, VectorSpaceWithBasis
from craft.blocks import MLP, AttentionHead, MultiAttentionHead

SubLayer = MLP | AttentionHead | MultiAttentionHead | None


@dataclasses.dataclass(frozen=True, eq=False)
class HaikuModel:
    """Assembled weights as Haiku params, their config, and `forward(params, ids, projection=None)`."""

    config: ModelConfig
    params: dict
    forward: Callable[..., ModelOutput]


def embeddings_from_vectors(
    residual: VectorSpaceWithBasis,
    tokens: Sequence[VectorInBasis | None],
    positions: Sequence[VectorInBasis | None],
    pad_id: int,
) -> Embeddings:
    """Embedding tables whose row `i` is `tokens[i]` (`positions[i]`) in residual coordinates.

    `None` is a row of zeros. A vector with a direction outside `residual` is refused: the
    embedding would silently drop it.
    """
    return Embeddings(
        token=_table(residual, tokens, "token"),
        position=_table(residual, positions, "position"),
        pad_id=pad_id,
    )


def _table(residual: VectorSpaceWithBasis, rows: Sequence[VectorInBasis | None], what: str) -> np.ndarray:
    table = np.zeros((len(rows), residual.num_dims), dtype=np.float32)
    for i, vector in enumerate(rows):
        if vector is None:
            continue
        outside = [d for d in vector.basis_directions if d not in residual]
        if outside:
            raise ValueError(
                f"{what} row {i} writes {outside[0]}, which is not a residual direction; "
                "add its space to the residual"
            )
        table[i] = vector.project(residual).magnitudes
    return table


def model_from_craft(
    residual: VectorSpaceWithBasis,
    sublayers: Sequence[SubLayer],
    embeddings: Embeddings,
    output_space: VectorSpaceWithBasis,
    *,
    max_seq_len: int,
    causal: bool,
    numerical_output: bool = False,
    sparse_qk: bool = True,
) -> HaikuModel:
    """Assemble `sublayers` (even index: attention, odd: MLP, `None`: empty) and build the model.

    The arguments are those of `compiler.passes.assemble.assemble`; the output is read from
    `output_space` (one logit per direction, or one value when `numerical_output`).
    """
    config, weights = assemble(
        residual,
        list(sublayers),
        embeddings,
        output_space,
        max_seq_len=max_seq_len,
        causal=causal,
        numerical_output=numerical_output,
        sparse_qk=sparse_qk,
    )
    params, forward, _ = build(config, weights)
    return HaikuModel(config=config, params=params, forward=forward)
