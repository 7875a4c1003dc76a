"""The test oracle: the compiled model's forward pass in plain numpy, from its config and params.

It is written independently of `compiler.model.transformer.CompiledTransformer` (no sparse forms,
no slicing plans, no XLA; a norm site computed from its definition): every weight is made dense over the coordinates it touches and applied
with one matrix product, so a bug in the fast forward pass shows as a difference here. It needs
no compilation, which matters where thousands of fresh models run once each (about a second of
XLA compilation per program would dominate a fuzzing run; the fuzz driver still sends a share of
its programs through the JAX model, `--jax-every`). Users: the differential fuzz, zoo records
(checked on exactly the weights they store) and the TransformerLens export's check
(`compiler.io.export.numpy_forward`, in float64).
"""

from __future__ import annotations

import numpy as np

from compiler.model.config import MASKED_LOGIT, MODULE_NAME, AttentionSpec, ModelConfig, NormSpec, SparseLinear
from craft.blocks import activate
from craft.numerics import softmax


def _linear(spec: SparseLinear, param: np.ndarray, x: np.ndarray, out_width: int | None = None) -> np.ndarray:
    """`x @ M` for the weight `spec` holds in `param`, placed into `out_width` output coordinates."""
    if spec.in_idx is not None:
        x = x[..., list(spec.in_idx)]
    y = x @ spec.dense(param).astype(x.dtype)
    if spec.out_idx is None:
        return y
    assert out_width is not None, "a scattered output needs its width"
    placement = np.zeros((len(spec.out_idx), out_width), dtype=x.dtype)  # column j -> out_idx[j], summed
    placement[np.arange(len(spec.out_idx)), np.asarray(spec.out_idx, dtype=np.intp)] = 1
    return y @ placement


def _normalised(stream: np.ndarray, norm: NormSpec | None) -> np.ndarray:
    """A norm site (`NormSpec`): LayerNorm or RMSNorm of the stream times the gain; the stream
    itself without a norm."""
    if norm is None:
        return stream
    centred = stream - stream.mean(axis=-1, keepdims=True) if norm.kind == "layernorm" else stream
    divisor = np.sqrt(np.mean(centred * centred, axis=-1, keepdims=True) + np.asarray(norm.eps, stream.dtype))
    return centred * (np.asarray(norm.scale, stream.dtype) / divisor)


def forward(config: ModelConfig, params: dict, ids: np.ndarray, dtype: type[np.floating] = np.float32) -> np.ndarray:
    """The model's output on token ids.

    Args:
      config: the model's configuration (sparse or dense weights alike).
      params: its Haiku-keyed parameters (`compiled_transformer/<module>` -> name -> array).
      ids: `[batch, T]` token ids.
      dtype: the float type every product is computed in (float32 as the compiled model runs).
    Returns:
      `[batch, T, n_out]` logits, or `[batch, T]` values for a numerical output.
    """
    groups: dict[str, dict[str, np.ndarray]] = {
        key.split("/", 1)[1]: {name: np.asarray(value, dtype=dtype) for name, value in values.items()}
        for key, values in params.items()
        if key.startswith(MODULE_NAME + "/")
    }
    width = config.residual_width
    ids = np.asarray(ids)
    length = ids.shape[-1]
    tokens: np.ndarray = np.eye(config.vocab_size, dtype=dtype)[ids]
    positions: np.ndarray = np.eye(config.max_seq_len + 1, dtype=dtype)[np.arange(length)]
    stream = _linear(config.token_embed, groups["embed"]["token"], tokens, width)
    stream = stream + _linear(config.pos_embed, groups["embed"]["position"], positions, width)
    mask = (ids != config.pad_id)[..., None, :]
    if config.causal:
        mask = mask & np.tril(np.ones((length, length), dtype=bool))
    for index in config.layer_order:  # a compiled loop's tied block once per repeat
        layer = config.layers[index]
        weights = groups.get(f"layer_{index}", {})
        read = _normalised(stream, config.norm)
        if isinstance(layer, AttentionSpec):
            delta = np.zeros_like(stream)
            for h, head in enumerate(layer.heads):
                q = _linear(head.w_q, weights[f"head_{h}_q"], read)
                k = _linear(head.w_k, weights[f"head_{h}_k"], read)
                v = _linear(head.w_v, weights[f"head_{h}_v"], read)
                logits = np.where(mask, q @ np.swapaxes(k, -1, -2), np.asarray(MASKED_LOGIT, dtype))
                delta = delta + _linear(head.w_o, weights[f"head_{h}_o"], softmax(logits) @ v, width)
        else:
            hidden = _linear(layer.w_in, weights["w_in"], read)
            delta = _linear(layer.w_out, weights["w_out"], activate(layer.activation, hidden), width)
        stream = stream + delta
    logits = _linear(config.unembed, groups["unembed"]["w_u"], _normalised(stream, config.norm))
    return logits[..., 0] if config.numerical_output else logits
