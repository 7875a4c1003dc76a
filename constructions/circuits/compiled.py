"""Circuits of a compiled model read from its Haiku parameters (the weights that actually run).

Sub-layer ``i`` of ``config.layers`` holds ``params["<prefix>/layer_i"]``; each head's Q/K/V/O
are ``SparseLinear`` specs expanded here to residual-sized matrices.  Heads are named
``L{i//2}H{h}`` after the transformer layer they sit in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable

import numpy as np

from constructions.circuits.attention_only import AttentionOnlyModel, HeadWeights, LabelledTable, bilinear_table

PREFIX = "compiled_transformer"


def _params(model, part: str) -> dict:
    return model.params[f"{PREFIX}/{part}"]


def compiled_heads(model) -> dict[int, tuple[HeadWeights, ...]]:
    """Heads of every non-empty attention sub-layer, keyed by sub-layer index."""
    width = len(model.config.residual_labels)
    out = {}
    for index, spec in enumerate(model.config.layers):
        if getattr(spec, "kind", None) != "attention" or not spec.heads:
            continue
        params = _params(model, f"layer_{index}")
        heads = []
        for h, head in enumerate(spec.heads):
            d_qk, d_vo = head.w_q.shape[1], head.w_v.shape[1]
            heads.append(HeadWeights(
                f"L{index // 2}H{h}",
                head.w_q.full_matrix(params[f"head_{h}_q"], width, d_qk).astype(np.float64),
                head.w_k.full_matrix(params[f"head_{h}_k"], width, d_qk).astype(np.float64),
                head.w_v.full_matrix(params[f"head_{h}_v"], width, d_vo).astype(np.float64),
                head.w_o.full_matrix(params[f"head_{h}_o"], d_vo, width).astype(np.float64),
            ))
        out[index] = tuple(heads)
    return out


@dataclass(frozen=True)
class CompiledEmbedding:
    """Token embedding rows ``(vocab_size, D)`` with their tokens, and position rows."""

    tokens: tuple[Hashable, ...]
    token_rows: np.ndarray
    position_rows: np.ndarray


def compiled_embedding(model) -> CompiledEmbedding:
    """The embedding tables over the residual basis, tokens in id order (vocab, BOS, PAD)."""
    width = len(model.config.residual_labels)
    embed = _params(model, "embed")
    cfg = model.config
    token = cfg.token_embed.full_matrix(embed["token"], cfg.vocab_size, width)
    position = cfg.pos_embed.full_matrix(embed["position"], cfg.max_seq_len + 1, width)
    by_id = sorted(model.input_encoder.token_to_id.items(), key=lambda item: item[1])
    return CompiledEmbedding(tuple(t for t, _ in by_id), token.astype(np.float64),
                             position.astype(np.float64))


def compiled_qk_table(model, sublayer: int, head: int) -> LabelledTable:
    """Token-level ``W_E QK W_E^T`` (query token rows, key token columns) of a compiled head."""
    emb = compiled_embedding(model)
    weights = compiled_heads(model)[sublayer][head]
    return bilinear_table(weights.qk, emb.token_rows, emb.token_rows, emb.tokens, emb.tokens)


def compiled_ov_table(model, sublayer: int, head: int) -> LabelledTable:
    """Token-level ``W_E OV`` with residual-label columns: what attending to a token writes."""
    emb = compiled_embedding(model)
    weights = compiled_heads(model)[sublayer][head]
    values = (emb.token_rows @ weights.ov).full()
    return LabelledTable(emb.tokens, tuple(model.config.residual_labels), values)


def as_attention_only(model) -> AttentionOnlyModel:
    """The compiled model as an :class:`AttentionOnlyModel` (raises if an MLP has weights)."""
    cfg = model.config
    width = len(cfg.residual_labels)
    for index, spec in enumerate(cfg.layers):
        if getattr(spec, "kind", None) == "mlp" and spec.w_in.shape[1] > 0:
            raise ValueError(f"sub-layer {index} is a non-empty MLP; path expansion covers "
                             "attention-only models")
    heads = compiled_heads(model)
    layers = tuple(heads[i] for i in sorted(heads))
    emb = compiled_embedding(model)
    unembed = _params(model, "unembed")["w_u"]
    n_out = cfg.unembed.shape[1]
    w_u = cfg.unembed.full_matrix(unembed, width, n_out).astype(np.float64)
    return AttentionOnlyModel(emb.token_rows, w_u, layers, w_pos=emb.position_rows,
                              causal=cfg.causal, token_labels=emb.tokens)
