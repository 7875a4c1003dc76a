"""Run a compiled fact table through the compiler's assembler and Haiku transformer.

Token ids: 0 is BOS, ``1 + i`` is ``db.tokens[i]``, the last id is padding.  The model's output
is the ``fact_out`` logit block, one logit per database token, in ``db.tokens`` order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable, Sequence

import numpy as np

from craft.bases import VectorSpaceWithBasis, join_vector_spaces

from constructions.facts.model import BOS_DIRECTION, FactModel


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
    from compiler.passes.assemble import Embeddings, assemble
    from compiler.model.transformer import build

    residual = join_vector_spaces(model.residual_space)
    n = len(model.db.tokens)
    table = np.zeros((n + 2, residual.num_dims), dtype=np.float32)
    table[0, residual.index(BOS_DIRECTION)] = 1.0
    for i, direction in enumerate(model.token_space.basis):
        table[i + 1, residual.index(direction)] = 1.0
    position = np.zeros((3, residual.num_dims), dtype=np.float32)
    config, weights = assemble(residual, model.sublayers, Embeddings(table, position, n + 1),
                               model.output_space, max_seq_len=2, causal=True,
                               numerical_output=False)
    built = build(config, weights)
    return HaikuFactModel(model, residual, config, built[0], built[1])
