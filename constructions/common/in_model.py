"""Run construction blocks inside the compiler's Haiku transformer (docs/superposition.md, 'Placing constructions in a model').

A construction model is a list of sub-layers (even index: attention, odd: MLP; ``None`` for an
empty one) over a residual space that contains the blocks' spaces, ``one`` (written at every
position by the position embedding, so MLP biases work) and ``tokens:BOS``. Tokens are given by
the residual vectors they write, e.g. sums of feature write vectors. The same assembly and Haiku
model that run compiled RASP programs run these weights, so the forward pass can be checked
against the numpy Craft evaluation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from craft.bases import ONE, VectorInBasis, VectorSpaceWithBasis, bos_direction, join_vector_spaces
from craft.blocks import SeriesWithResiduals

BOS = bos_direction()


@dataclass(frozen=True, eq=False)
class ConstructionModel:
    """Assembled weights plus the Craft model they came from."""

    residual: VectorSpaceWithBasis
    craft_model: SeriesWithResiduals
    sublayers: tuple
    token_vectors: np.ndarray  # (vocab, D): row 0 is BOS, the last row is padding
    config: object
    params: dict
    forward: Callable[..., Any]  # the Haiku forward pass, `forward(params, ids)`
    max_seq_len: int

    @property
    def pad_id(self) -> int:
        return self.token_vectors.shape[0] - 1

    def embed(self, ids: np.ndarray) -> np.ndarray:
        """Residual after the embedding, ``(batch, T, D)``: token vectors plus ``one``."""
        stream = self.token_vectors[np.asarray(ids)].astype(np.float64)
        stream[..., self.residual.index(ONE)] = 1.0
        return stream

    def run_haiku(self, ids: np.ndarray) -> np.ndarray:
        """Final residual stream of the Haiku model, ``(batch, T, D)``."""
        import jax.numpy as jnp

        out = self.forward(self.params, jnp.asarray(ids, dtype=jnp.int32))
        return np.asarray(out.residuals[-1])

    def run_craft(self, ids: np.ndarray) -> np.ndarray:
        """Final residual stream of the numpy Craft evaluation, ``(batch, T, D)``."""
        start = VectorInBasis(self.residual.basis, self.embed(ids))
        return self.craft_model.apply(start).project(self.residual).magnitudes


def build_construction_model(sublayers: Sequence, token_vectors: Sequence[VectorInBasis],
                             max_seq_len: int, *, causal: bool = False) -> ConstructionModel:
    """Assemble ``sublayers`` with a vocabulary whose token ``i + 1`` writes ``token_vectors[i]``.

    Token id 0 is BOS (writes ``tokens:BOS``); an extra last id is padding (writes nothing).
    """
    from compiler.model.from_craft import embeddings_from_vectors, model_from_craft
    from compiler.passes.layout import CraftModel

    blocks = [b for b in sublayers if b is not None]
    spaces = [VectorSpaceWithBasis((ONE, BOS))]
    spaces += [s for b in blocks for s in (b.input_space, b.output_space)]
    spaces += [v.space for v in token_vectors]
    residual = join_vector_spaces(*spaces)
    tokens = [residual.vector_from_basis_direction(BOS), *token_vectors, None]
    one = residual.vector_from_basis_direction(ONE)
    embeddings = embeddings_from_vectors(residual, tokens, [one] * (max_seq_len + 1), pad_id=len(tokens) - 1)
    haiku = model_from_craft(CraftModel(residual, tuple(sublayers), embeddings, residual, max_seq_len, causal))
    return ConstructionModel(residual, SeriesWithResiduals(tuple(blocks)), tuple(sublayers), embeddings.token,
                             haiku.config, haiku.params, haiku.forward, max_seq_len)
