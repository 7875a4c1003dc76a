"""The compiled model's forward pass in numpy float32, from its config and params.

Jitting a fresh Haiku model costs about a second of XLA compilation per program, which dominates
a fuzzing run; this interpreter reads the very same `ModelConfig` and params (the assembled
weights) and mirrors `compiler.model.transformer.CompiledTransformer` step by step without compiling anything.
The fuzz driver still runs a share of the programs through the real JAX model (`--jax-every`).
"""

from __future__ import annotations

import numpy as np

from compiler.model.config import MASKED_LOGIT, MODULE_NAME, AttentionSpec, ModelConfig, SparseLinear
from craft.blocks import activate
from craft.numerics import softmax


def _linear(spec: SparseLinear, param: np.ndarray, x: np.ndarray, out_width: int | None = None) -> np.ndarray:
    """`compiler.model.transformer.apply_linear` in numpy."""
    if spec.in_idx is not None:
        x = x[..., list(spec.in_idx)]
    y = x @ spec.dense(param).astype(np.float32)
    if spec.out_idx is None:
        return y
    out = np.zeros(y.shape[:-1] + (out_width,), dtype=np.float32)
    np.add.at(out, (..., list(spec.out_idx)), y)
    return out


def forward(config: ModelConfig, params: dict, ids: np.ndarray) -> np.ndarray:
    """Model output for `ids` (`[batch, T]`): `[batch, T, n_out]` logits or `[batch, T]` values."""
    groups = {
        key.split("/", 1)[1]: {name: np.asarray(value, dtype=np.float32) for name, value in values.items()}
        for key, values in params.items()
        if key.startswith(MODULE_NAME + "/")
    }
    width = config.residual_width
    ids = np.asarray(ids)
    length = ids.shape[-1]
    tokens = np.eye(config.vocab_size, dtype=np.float32)[ids]
    positions = np.eye(config.max_seq_len + 1, dtype=np.float32)[np.arange(length)]
    stream = _linear(config.token_embed, groups["embed"]["token"], tokens, width)
    stream = stream + _linear(config.pos_embed, groups["embed"]["position"], positions, width)
    mask = (ids != config.pad_id)[..., None, :]
    if config.causal:
        mask = mask & np.tril(np.ones((length, length), dtype=bool))
    for index in config.layer_order:  # a compiled loop's tied block once per repeat
        layer = config.layers[index]
        weights = groups.get(f"layer_{index}", {})
        if isinstance(layer, AttentionSpec):
            delta = np.zeros_like(stream)
            for h, head in enumerate(layer.heads):
                q = _linear(head.w_q, weights[f"head_{h}_q"], stream)
                k = _linear(head.w_k, weights[f"head_{h}_k"], stream)
                v = _linear(head.w_v, weights[f"head_{h}_v"], stream)
                logits = np.where(mask, q @ np.swapaxes(k, -1, -2), np.float32(MASKED_LOGIT))
                delta = delta + _linear(head.w_o, weights[f"head_{h}_o"], softmax(logits) @ v, width)
        else:
            hidden = _linear(layer.w_in, weights["w_in"], stream)
            delta = _linear(layer.w_out, weights["w_out"], activate(layer.activation, hidden), width)
        stream = stream + delta
    logits = _linear(config.unembed, groups["unembed"]["w_u"], stream)
    return logits[..., 0] if config.numerical_output else logits
