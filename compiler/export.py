"""Export a compiled model as a TransformerLens-style state dict and config.

`to_transformer_lens(model)` returns numpy arrays under the parameter names and shapes
`transformer_lens.HookedTransformer` uses, and a dict of `HookedTransformerConfig` arguments.
TransformerLens needs one head count, head width and MLP width for the whole model, so smaller
heads and MLPs are padded with zeros (a zero head attends uniformly and writes nothing; a zero
ReLU unit stays 0). Compiled models have no layer norm and no biases (bias terms travel on the
`one` residual direction), so every bias is zero and `normalization_type` is `None`. Attention
scores are not scaled (`use_attn_scale=False`): the compiled weights already hold the intended
logits.

`numpy_forward(state_dict, cfg, ids)` is a plain-numpy forward pass of that architecture, used
to check an export without TransformerLens. `to_hooked_transformer(model)` builds the real
`HookedTransformer` when `torch` and `transformer_lens` are installed (an optional extra).

Difference to the compiled model: it masks PAD keys; the exported model does not know PAD (pass
TransformerLens an `attention_mask`, or compare on unpadded inputs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compiler.compiled_model import CompiledModel
from compiler.errors import CompilerError
from compiler.model import AttentionSpec, MLPSpec
from compiler.weights import (
    head_weights,
    mlp_weights,
    position_embedding,
    token_embedding,
    unembedding,
)

StateDict = dict[str, np.ndarray]


class ExportError(CompilerError):
    """The model uses something the target format cannot express (e.g. a non-ReLU MLP)."""


def _blocks(model: CompiledModel) -> list[tuple[int | None, int | None]]:
    """`(attention sub-layer, MLP sub-layer)` indices per transformer block."""
    layers = model.config.layers
    blocks = []
    for start in range(0, len(layers), 2):
        attn = start if isinstance(layers[start], AttentionSpec) else None
        mlp = start + 1 if start + 1 < len(layers) and isinstance(layers[start + 1], MLPSpec) else None
        blocks.append((attn, mlp))
    return blocks


def _sizes(model: CompiledModel) -> tuple[int, int, int]:
    """`(n_heads, d_head, d_mlp)`: the largest over the model (at least 1 head of width 1)."""
    n_heads, d_head, d_mlp = 1, 1, 0
    for layer in model.config.layers:
        if isinstance(layer, AttentionSpec):
            n_heads = max(n_heads, len(layer.heads))
            for head in layer.heads:
                d_head = max(d_head, head.w_q.shape[1], head.w_v.shape[1])
        else:
            if layer.w_in.shape[1] and layer.activation != "relu":
                raise ExportError(
                    f"an MLP uses the {layer.activation!r} activation; TransformerLens export "
                    "supports only ReLU MLPs (compile programs, not bilinear/square constructions)"
                )
            d_mlp = max(d_mlp, layer.w_in.shape[1])
    return n_heads, d_head, d_mlp


def to_transformer_lens(model: CompiledModel) -> tuple[StateDict, dict[str, Any]]:
    """`(state_dict, cfg)`: float32 numpy arrays named and shaped as TransformerLens expects.

    Raises `ExportError` when an MLP's activation is not ReLU.
    """
    config = model.config
    width = config.residual_width
    n_heads, d_head, d_mlp = _sizes(model)
    w_u = unembedding(model)
    state: StateDict = {
        "embed.W_E": token_embedding(model),
        "pos_embed.W_pos": position_embedding(model),
        "unembed.W_U": w_u,
        "unembed.b_U": np.zeros(w_u.shape[1], np.float32),
    }
    blocks = _blocks(model)
    for index, (attn, mlp) in enumerate(blocks):
        prefix = f"blocks.{index}"
        w_q = np.zeros((n_heads, width, d_head), np.float32)
        w_k, w_v = np.zeros_like(w_q), np.zeros_like(w_q)
        w_o = np.zeros((n_heads, d_head, width), np.float32)
        layer = config.layers[attn] if attn is not None else AttentionSpec(())
        for h in range(len(layer.heads)):
            weights = head_weights(model, attn, h)
            d_qk, d_v = weights.w_q.shape[1], weights.w_v.shape[1]
            w_q[h, :, :d_qk], w_k[h, :, :d_qk] = weights.w_q, weights.w_k
            w_v[h, :, :d_v], w_o[h, :d_v, :] = weights.w_v, weights.w_o
        state.update(
            {
                f"{prefix}.attn.W_Q": w_q,
                f"{prefix}.attn.W_K": w_k,
                f"{prefix}.attn.W_V": w_v,
                f"{prefix}.attn.W_O": w_o,
                f"{prefix}.attn.b_Q": np.zeros((n_heads, d_head), np.float32),
                f"{prefix}.attn.b_K": np.zeros((n_heads, d_head), np.float32),
                f"{prefix}.attn.b_V": np.zeros((n_heads, d_head), np.float32),
                f"{prefix}.attn.b_O": np.zeros(width, np.float32),
            }
        )
        if d_mlp:
            w_in = np.zeros((width, d_mlp), np.float32)
            w_out = np.zeros((d_mlp, width), np.float32)
            if mlp is not None:
                weights = mlp_weights(model, mlp)
                w_in[:, : weights.hidden_width] = weights.w_in
                w_out[: weights.hidden_width] = weights.w_out
            state.update(
                {
                    f"{prefix}.mlp.W_in": w_in,
                    f"{prefix}.mlp.b_in": np.zeros(d_mlp, np.float32),
                    f"{prefix}.mlp.W_out": w_out,
                    f"{prefix}.mlp.b_out": np.zeros(width, np.float32),
                }
            )
    cfg = {
        "n_layers": len(blocks),
        "d_model": width,
        "n_ctx": config.max_seq_len + 1,
        "d_head": d_head,
        "n_heads": n_heads,
        "d_mlp": d_mlp or None,
        "d_vocab": config.vocab_size,
        "d_vocab_out": int(w_u.shape[1]),
        "act_fn": "relu",
        "normalization_type": None,
        "attn_only": not d_mlp,
        "positional_embedding_type": "standard",
        "use_attn_scale": False,
        "attention_dir": "causal" if config.causal else "bidirectional",
        "default_prepend_bos": False,
    }
    return {name: np.asarray(value, np.float32) for name, value in state.items()}, cfg


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    weights = np.exp(shifted)
    return weights / weights.sum(axis=-1, keepdims=True)


def numpy_forward(state: StateDict, cfg: dict[str, Any], ids: np.ndarray) -> np.ndarray:
    """Logits `[batch, T, d_vocab_out]` of the exported architecture, computed in float64."""
    ids = np.asarray(ids)
    length = ids.shape[-1]
    weights = {name: np.asarray(value, np.float64) for name, value in state.items()}
    resid = weights["embed.W_E"][ids] + weights["pos_embed.W_pos"][:length]
    future = np.triu(np.ones((length, length), dtype=bool), k=1)
    scale = np.sqrt(cfg["d_head"]) if cfg.get("use_attn_scale", True) else 1.0
    for index in range(cfg["n_layers"]):
        p = f"blocks.{index}"
        q = np.einsum("btd,hde->bhte", resid, weights[f"{p}.attn.W_Q"]) + weights[f"{p}.attn.b_Q"][:, None]
        k = np.einsum("btd,hde->bhte", resid, weights[f"{p}.attn.W_K"]) + weights[f"{p}.attn.b_K"][:, None]
        v = np.einsum("btd,hde->bhte", resid, weights[f"{p}.attn.W_V"]) + weights[f"{p}.attn.b_V"][:, None]
        scores = np.einsum("bhte,bhse->bhts", q, k) / scale
        if cfg["attention_dir"] == "causal":
            scores = np.where(future, -np.inf, scores)
        mixed = np.einsum("bhts,bhse->bhte", _softmax(scores), v)
        resid = resid + np.einsum("bhte,hed->btd", mixed, weights[f"{p}.attn.W_O"]) + weights[f"{p}.attn.b_O"]
        if not cfg["attn_only"]:
            hidden = np.maximum(resid @ weights[f"{p}.mlp.W_in"] + weights[f"{p}.mlp.b_in"], 0.0)
            resid = resid + hidden @ weights[f"{p}.mlp.W_out"] + weights[f"{p}.mlp.b_out"]
    return resid @ weights["unembed.W_U"] + weights["unembed.b_U"]


def to_hooked_transformer(model: CompiledModel, device: str = "cpu") -> Any:
    """A `transformer_lens.HookedTransformer` holding the exported weights.

    Needs `torch` and `transformer_lens` (not dependencies of this project); raises
    `ImportError` naming them when either is missing.
    """
    try:
        import torch
        from transformer_lens import HookedTransformer, HookedTransformerConfig
    except ImportError as error:
        raise ImportError(
            "to_hooked_transformer needs the optional packages torch and transformer_lens "
            f"({error}); to_transformer_lens works without them"
        ) from error
    state, cfg = to_transformer_lens(model)
    hooked = HookedTransformer(HookedTransformerConfig(**cfg, device=device))
    tensors = {name: torch.tensor(value, device=device) for name, value in state.items()}
    missing, unexpected = hooked.load_state_dict(tensors, strict=False)
    missing = [name for name in missing if not name.endswith((".mask", ".IGNORE"))]
    if missing or unexpected:
        raise ExportError(
            f"TransformerLens expects other parameters: missing {missing}, unexpected {unexpected}"
        )
    return hooked.eval()
