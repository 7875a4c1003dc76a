"""Craft blocks laid out in sub-layers -> a runnable Haiku model: the one way to do it.

`compile_rasp` and every construction that runs its blocks in the compiler's transformer
(`constructions.common.in_model`, `constructions.facts.haiku_model`) describe the model as a
`compiler.passes.layout.CraftModel` (blocks per sub-layer, residual space, embedding tables,
output space) and call `model_from_craft`, which assembles the weights
(`compiler.model.assemble`) and builds the jitted Haiku forward pass from them
(`compiler.model.transformer.build`). `embeddings_from_vectors` writes the embedding tables from
residual vectors, for callers that describe tokens and positions as Craft vectors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import numpy as np

from compiler.model.assemble import assemble
from compiler.model.config import TiedBlock
from compiler.model.forms import choose_forms
from compiler.model.norm import with_norm
from compiler.model.reuse import ResidualReuse
from compiler.model.reuse import reuse_residual as reuse_directions
from compiler.model.transformer import ModelConfig, build
from compiler.passes.layout import CraftModel, Embeddings
from craft.bases import VectorInBasis, VectorSpaceWithBasis


@dataclasses.dataclass(frozen=True, eq=False)
class HaikuModel:
    """Assembled weights as Haiku params, their config, and `forward(params, ids, projection=None)`."""

    config: ModelConfig
    params: dict
    forward: jax.stages.Wrapped
    # What the residual-reuse pass did (`compiler.model.reuse`); None when it did not run.
    reuse: ResidualReuse | None = None


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
    craft: CraftModel,
    *,
    sparse_qk: bool = True,
    backend: str | None = None,
    tied: TiedBlock | None = None,
    reuse_residual: bool = False,
    norm: str | None = None,
    norm_budget: float = 0.0,
) -> HaikuModel:
    """Assemble `craft`'s blocks and tables into weights and build the Haiku model.

    Args:
      craft: the blocks per sub-layer, residual space, embeddings and output space.
      sparse_qk: factor each `W_QK` per component (`compiler.passes.qk_factor`); False gives
        `I, W_QKᵀ`.
      backend: the backend whose costs choose each weight's form (`compiler.model.forms`);
        default `jax.default_backend()`.
      tied: sub-layers of `craft` the forward pass repeats with the same weights (a compiled
        loop, `compiler.passes.loops`); None runs every sub-layer once.
      reuse_residual: let values written later take the residual slots of values no longer
        read (`compiler.model.reuse`): a narrower stream, several owners per slot.
      norm: "layernorm" or "rmsnorm": a pre-norm before every sub-layer and the unembedding
        (`compiler.model.norm`); None: none.
      norm_budget: with a norm, the bound on the stream's squared size its anchor is sized by
        (`compiler.passes.norm_budget.residual_budget`).

    Returns:
      The config, the Haiku params and `forward(params, ids, projection=None)`.

    Raises:
      ValueError: `reuse_residual` together with `tied` or with `norm`.
    """
    config, weights = assemble(
        craft.residual,
        list(craft.sublayers),
        craft.embeddings,
        craft.output_space,
        max_seq_len=craft.max_seq_len,
        causal=craft.causal,
        numerical_output=craft.numerical_output,
        sparse_qk=sparse_qk,
    )
    if reuse_residual and tied is not None:
        raise ValueError("reuse_residual cannot be combined with a tied block: its slots would change owner between repeats")
    if reuse_residual and norm is not None:
        raise ValueError("reuse_residual cannot be combined with a norm: the norm coordinates would need slots")
    reuse = None
    if reuse_residual:
        config, weights, reuse = reuse_directions(config, weights)
    if norm is not None:
        config, weights = with_norm(config, weights, norm, norm_budget)
    config = choose_forms(dataclasses.replace(config, tied=tied), weights, backend or jax.default_backend())
    params, forward, _ = build(config, weights)
    return HaikuModel(config=config, params=params, forward=forward, reuse=reuse)
