"""Run a compiled fact table through the compiler's assembler and Haiku transformer.

Token ids: 0 is BOS, ``1 + i`` is ``db.tokens[i]``, the last id is padding.  The model's output
is the ``fact_out`` logit block, one logit per database token, in ``db.tokens`` order.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from constructions.facts.model import BOS_DIRECTION, FactModel
from craft.bases import VectorSpaceWithBasis, join_vector_spaces


@dataclass(frozen=True, eq=False)
class HaikuFactModel:
    """Assembled weights of a :class:`FactModel` and the jitted forward function."""

    fact_model: FactModel
    residual: VectorSpaceWithBasis
    config: object
    params: dict
    forward: Callable

    def ids(self, prompts: Sequence[tuple[Hashable, Hashable]]) -> np.ndarray:
        """``[BOS, subject, predicate]`` id rows."""
        tokens = self.fact_model.db.tokens
        return np.array([[0, 1 + tokens.index(k), 1 + tokens.index(q)] for k, q in prompts],
                        dtype=np.int32)

    def logits(self, prompts: Sequence[tuple[Hashable, Hashable]]) -> np.ndarray:
        """Last-position logits ``(n, |tokens|)`` (float32 forward pass)."""
        import jax.numpy as jnp

        out = self.forward(self.params, jnp.asarray(self.ids(prompts)))
        return np.asarray(out.output[:, -1], dtype=np.float64)


def assemble_fact_model(model: FactModel) -> HaikuFactModel:
    """Lay the fact model's blocks out as one attention + one MLP sub-layer and build it."""
    from compiler.model.from_craft import embeddings_from_vectors, model_from_craft
    from compiler.passes.layout import CraftModel

    residual = join_vector_spaces(model.residual_space)
    bos = residual.vector_from_basis_direction(BOS_DIRECTION)
    words = [residual.vector_from_basis_direction(d) for d in model.token_space.basis]
    tokens = [bos, *words, None]
    embeddings = embeddings_from_vectors(residual, tokens, [None] * 3, pad_id=len(tokens) - 1)
    haiku = model_from_craft(CraftModel(residual, tuple(model.sublayers), embeddings, model.output_space,
                                        max_seq_len=2, causal=True))
    return HaikuFactModel(model, residual, haiku.config, haiku.params, haiku.forward)
