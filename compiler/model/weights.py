"""Dense views of a compiled model's weights in residual-stream coordinates.

The model stores every weight as a `SparseLinear` (a small matrix plus the residual coordinates
it reads or writes). Pictures, exporters and summaries want plain matrices over the whole
residual stream; the functions here build them from `model.config` and `model.params` alone, so
they work on freshly compiled and on loaded models alike.

Sub-layers are addressed by their index in `model.config.layers` (even: attention, odd: MLP).
Any object with `params` and `config` works: a `CompiledModel`, a loaded one, or the `HaikuModel`
that `compiler.model.from_craft` builds from Craft blocks.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import numpy as np

from compiler.model.config import MODULE_NAME, AttentionSpec, MLPSpec, ModelConfig, SparseLinear


class HasWeights(Protocol):
    """What the accessors read: Haiku params keyed `compiled_transformer/<part>` and their config."""

    @property
    def params(self) -> dict: ...

    @property
    def config(self) -> ModelConfig: ...


def module_params(model: HasWeights, module: str) -> dict[str, np.ndarray]:
    """The numpy parameters of one part (`"embed"`, `"layer_3"`, `"unembed"`); `{}` when empty."""
    values = model.params.get(f"{MODULE_NAME}/{module}", {})
    return {name: np.asarray(value) for name, value in values.items()}


@dataclasses.dataclass(frozen=True)
class HeadWeights:
    """One head over the residual stream: `W_Q`, `W_K` `[D, d_qk]`, `W_V` `[D, d_v]`, `W_O` `[d_v, D]`."""

    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray
    w_o: np.ndarray

    @property
    def w_qk(self) -> np.ndarray:
        """`[D, D]` bilinear score matrix: query residual (rows) by key residual (columns)."""
        return self.w_q @ self.w_k.T

    @property
    def w_ov(self) -> np.ndarray:
        """`[D, D]` map from the key's residual (rows) to what the head writes (columns)."""
        return self.w_v @ self.w_o


@dataclasses.dataclass(frozen=True)
class MLPWeights:
    """One MLP over the residual stream: `W_in` `[D, H]`, `W_out` `[H, D]` and its activation."""

    w_in: np.ndarray
    w_out: np.ndarray
    activation: str

    @property
    def hidden_width(self) -> int:
        return self.w_in.shape[1]


def _reader(spec: SparseLinear, param: np.ndarray, width: int) -> np.ndarray:
    """A map that reads residual coordinates: `[D, out]`."""
    return spec.full_matrix(param, width, spec.shape[1])


def _writer(spec: SparseLinear, param: np.ndarray, width: int) -> np.ndarray:
    """A map that writes residual coordinates: `[in, D]`."""
    return spec.full_matrix(param, spec.shape[0], width)


def attention_spec(model: HasWeights, sublayer: int) -> AttentionSpec:
    layer = model.config.layers[sublayer]
    if not isinstance(layer, AttentionSpec):
        raise ValueError(f"sub-layer {sublayer} is an MLP, not an attention sub-layer")
    return layer


def attention_sublayers(model: HasWeights) -> tuple[int, ...]:
    """Indices of the attention sub-layers that have at least one head."""
    return tuple(i for i, layer in enumerate(model.config.layers) if isinstance(layer, AttentionSpec) and layer.heads)


def layer_heads(model: HasWeights, sublayer: int) -> tuple[HeadWeights, ...]:
    """The dense weights of every head of attention sub-layer `sublayer`, in head order."""
    return tuple(head_weights(model, sublayer, h) for h in range(len(attention_spec(model, sublayer).heads)))


def head_weights(model: HasWeights, sublayer: int, head: int) -> HeadWeights:
    """The dense weights of head `head` of attention sub-layer `sublayer`."""
    layer = attention_spec(model, sublayer)
    if not 0 <= head < len(layer.heads):
        raise ValueError(f"sub-layer {sublayer} has {len(layer.heads)} heads, no head {head}")
    spec = layer.heads[head]
    params = module_params(model, f"layer_{sublayer}")
    width = model.config.residual_width
    return HeadWeights(
        w_q=_reader(spec.w_q, params[f"head_{head}_q"], width),
        w_k=_reader(spec.w_k, params[f"head_{head}_k"], width),
        w_v=_reader(spec.w_v, params[f"head_{head}_v"], width),
        w_o=_writer(spec.w_o, params[f"head_{head}_o"], width),
    )


def mlp_weights(model: HasWeights, sublayer: int) -> MLPWeights:
    """The dense weights of MLP sub-layer `sublayer` (hidden width 0 when it is empty)."""
    layer = model.config.layers[sublayer]
    if not isinstance(layer, MLPSpec):
        raise ValueError(f"sub-layer {sublayer} is an attention sub-layer, not an MLP")
    params = module_params(model, f"layer_{sublayer}")
    width = model.config.residual_width
    return MLPWeights(
        w_in=_reader(layer.w_in, params["w_in"], width),
        w_out=_writer(layer.w_out, params["w_out"], width),
        activation=layer.activation,
    )


def token_embedding(model: HasWeights) -> np.ndarray:
    """`[vocab_size, D]`: the residual vector each token id writes (BOS and PAD included)."""
    config = model.config
    param = module_params(model, "embed")["token"]
    return config.token_embed.full_matrix(param, config.vocab_size, config.residual_width)


def position_embedding(model: HasWeights) -> np.ndarray:
    """`[max_seq_len + 1, D]`: the residual vector each position writes (position 0 is BOS)."""
    config = model.config
    param = module_params(model, "embed")["position"]
    return config.pos_embed.full_matrix(param, config.max_seq_len + 1, config.residual_width)


def unembedding(model: HasWeights) -> np.ndarray:
    """`[D, n_out]`: residual to output logits (one column for a numerical output)."""
    config = model.config
    return _reader(config.unembed, module_params(model, "unembed")["w_u"], config.residual_width)


def parameter_counts(model: HasWeights) -> tuple[int, int]:
    """`(stored, non_zero)`: entries of the stored parameter arrays and how many are non-zero."""
    stored = nonzero = 0
    for values in model.params.values():
        for value in values.values():
            array = np.asarray(value)
            stored += array.size
            nonzero += int(np.count_nonzero(array))
    return stored, nonzero
