"""Circuits of a compiled model, read from the weights that actually run.

The dense residual-sized matrices come from the compiler's accessors (`compiler.model.weights`),
so this module knows nothing of the parameter layout; it only names the heads and labels the
rows. Heads are named ``L{i//2}H{h}`` after the transformer layer of sub-layer ``i``. Anything
with ``params`` and ``config`` works: a compiled or loaded model, or one built by
``compiler.model.from_craft`` (embedding tables then need ``input_encoder`` for the token labels).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from compiler.model import weights
from compiler.model.compiled_model import CompiledModel
from compiler.model.config import MLPSpec
from constructions.circuits.attention_only import AttentionOnlyModel, HeadWeights, LabelledTable, bilinear_table


def compiled_heads(model: weights.HasWeights) -> dict[int, tuple[HeadWeights, ...]]:
    """Heads of every non-empty attention sub-layer, keyed by sub-layer index (float64)."""
    return {
        index: tuple(
            HeadWeights(
                f"L{index // 2}H{h}",
                *(m.astype(np.float64) for m in (head.w_q, head.w_k, head.w_v, head.w_o)),
            )
            for h, head in enumerate(weights.layer_heads(model, index))
        )
        for index in weights.attention_sublayers(model)
    }


@dataclass(frozen=True)
class CompiledEmbedding:
    """Token embedding rows ``(vocab_size, D)`` with their tokens, and position rows."""

    tokens: tuple[Hashable, ...]
    token_rows: np.ndarray
    position_rows: np.ndarray


def compiled_embedding(model: CompiledModel) -> CompiledEmbedding:
    """The embedding tables over the residual basis, tokens in id order (vocab, BOS, PAD)."""
    by_id = sorted(model.input_encoder.token_to_id.items(), key=lambda item: item[1])
    return CompiledEmbedding(
        tuple(t for t, _ in by_id),
        weights.token_embedding(model).astype(np.float64),
        weights.position_embedding(model).astype(np.float64),
    )


def compiled_qk_table(model: CompiledModel, sublayer: int, head: int) -> LabelledTable:
    """Token-level ``W_E QK W_E^T`` (query token rows, key token columns) of a compiled head."""
    emb = compiled_embedding(model)
    head_weights = compiled_heads(model)[sublayer][head]
    return bilinear_table(head_weights.qk, emb.token_rows, emb.token_rows, emb.tokens, emb.tokens)


def compiled_ov_table(model: CompiledModel, sublayer: int, head: int) -> LabelledTable:
    """Token-level ``W_E OV`` with residual-label columns: what attending to a token writes."""
    emb = compiled_embedding(model)
    head_weights = compiled_heads(model)[sublayer][head]
    values = (emb.token_rows @ head_weights.ov).full()
    return LabelledTable(emb.tokens, tuple(model.config.residual_labels), values)


def as_attention_only(model: CompiledModel) -> AttentionOnlyModel:
    """The compiled model as an :class:`AttentionOnlyModel` (raises if an MLP has weights)."""
    config = model.config
    for index, layer in enumerate(config.layers):
        if isinstance(layer, MLPSpec) and weights.mlp_weights(model, index).hidden_width > 0:
            raise ValueError(f"sub-layer {index} is a non-empty MLP; path expansion covers "
                             "attention-only models")
    heads = compiled_heads(model)
    emb = compiled_embedding(model)
    return AttentionOnlyModel(
        emb.token_rows,
        weights.unembedding(model).astype(np.float64),
        tuple(heads[i] for i in sorted(heads)),
        w_pos=emb.position_rows,
        causal=config.causal,
        token_labels=emb.tokens,
    )
