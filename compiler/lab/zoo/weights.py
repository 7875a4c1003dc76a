"""A record's weights: dense float32 tensors as safetensors bytes, and a numpy forward over them.

Tensor names are those of the project's model files (`compiler.io.files`):
`compiled_transformer/embed/token` `[vocab+2, D]`, `.../embed/position` `[max_seq_len+1, D]`,
`.../layer_<i>/head_<h>_q|k|v` `[D, k]`, `.../layer_<i>/head_<h>_o` `[k, D]`,
`.../layer_<i>/w_in` `[D, H]`, `.../layer_<i>/w_out` `[H, D]`, `.../unembed/w_u` `[D, n_out]`
(sub-layer `i`: even attention, odd MLP). There are no biases: the constant `one` direction of
the residual stream plays their part.

A compressed record folds a projection `W` (`[D, d]`) into the weights, giving an ordinary model
with a d-dimensional residual stream: every tensor that writes the stream (embeddings, `_o`,
`w_out`) is multiplied by `W` on the right, every tensor that reads it (`_q`, `_k`, `_v`, `w_in`,
`w_u`) by `Wᵀ` on the left. `W` itself is kept as the tensor `projection`.

A reparametrised record comes from a `compiler.lab.circuits.components.Network` (the form
`compiler.lab.circuits.variants.reparametrise` works on): `network_tensors` writes a network back
under the same names. Its heads keep the network's padding (every head of a layer as wide as the
widest), which the reparametrisation's per-head maps fill in.

The header's `__metadata__` holds `zoo_model`: JSON with what the forward pass needs besides the
tensors (`causal`, `bos_id`, `pad_id`, `numerical_output`, the activation of every MLP, and for
a `layernorm` record its `norm`: kind, gain, eps, anchor, spread, as `compiler.model.config.NormSpec`
has them: every sub-layer and the unembedding read `gain * (x - mean(x)) / sqrt(var(x) + eps)`).
`forward` runs those bytes through the project's numpy oracle (`compiler.model.oracle`),
so a stored record is checked on exactly the weights it stores (no JAX, nothing compiled).
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import safetensors.numpy

from compiler.io.files import safetensors_bytes
from compiler.io.serialize import norm_from_json, norm_to_json
from compiler.lab.circuits.components import AttentionLayer, Network
from compiler.model import dense, oracle
from compiler.model.compiled_model import CompiledModel
from compiler.model.config import MODULE_NAME, MLPSpec
from compiler.model.dense import config_of_dense_tensors

PROJECTION = "projection"


def network_tensors(net: Network) -> dict[str, np.ndarray]:
    """A network's weights under the record's tensor names (sub-layer indices from its sources).

    Empty sub-layers (an attention layer without heads, an MLP without neurons) are absent from
    a network and so from the result; `forward` skips a sub-layer that has no tensors.
    """
    prefix = MODULE_NAME
    tensors = {f"{prefix}/embed/token": net.tok_embed, f"{prefix}/embed/position": net.pos_embed,
               f"{prefix}/unembed/w_u": net.unembed}
    writers = iter(net.sources[2:])  # after the two embeddings: heads and MLPs in layer order
    for layer in net.layers:
        if isinstance(layer, AttentionLayer):
            heads = [next(writers) for _ in range(len(layer.w_q))]
            assert heads[0].block is not None  # a head's block
            index = 2 * heads[0].block
            for h, source in enumerate(heads):
                for part, stack in zip("qkvo", (layer.w_q, layer.w_k, layer.w_v, layer.w_o)):
                    tensors[f"{prefix}/layer_{index}/head_{source.head}_{part}"] = stack[h]
        else:
            block = next(writers).block
            assert block is not None  # an MLP's block
            index = 2 * block + 1
            tensors[f"{prefix}/layer_{index}/w_in"] = layer.w_in
            tensors[f"{prefix}/layer_{index}/w_out"] = layer.w_out
    return {name: np.ascontiguousarray(value, dtype=np.float32) for name, value in tensors.items()}


def fold_projection(tensors: dict[str, np.ndarray], w: np.ndarray) -> dict[str, np.ndarray]:
    """The d-dimensional model that `W` makes of `tensors` (`compiler.model.dense.fold_projection`),
    with `W` itself kept as the tensor `projection`."""
    return dense.fold_projection(tensors, w) | {PROJECTION: np.ascontiguousarray(w, dtype=np.float32)}


def forward_metadata(model: CompiledModel) -> dict:
    """What `forward` needs besides the tensors."""
    encoder = model.input_encoder
    return {
        "causal": bool(model.config.causal),
        "bos_id": encoder.bos_id,
        "pad_id": encoder.pad_id,
        "numerical_output": bool(model.config.numerical_output),
        "activations": {str(i): layer.activation for i, layer in enumerate(model.config.layers)
                        if isinstance(layer, MLPSpec)},
        **({} if model.config.norm is None else {"norm": norm_to_json(model.config.norm)}),
    }


def to_bytes(tensors: dict[str, np.ndarray], metadata: dict) -> bytes:
    """Deterministic safetensors bytes (sorted header, tensors in name order)."""
    text = json.dumps(metadata, sort_keys=True, separators=(",", ":"))
    return safetensors_bytes(tensors, {"zoo_model": text})


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def from_bytes(data: bytes) -> tuple[dict[str, np.ndarray], dict]:
    """(tensors, forward metadata) of a record's `weights` column."""
    tensors = safetensors.numpy.load(data)
    header_length = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + header_length])
    return tensors, json.loads(header["__metadata__"]["zoo_model"])


def forward(tensors: dict[str, np.ndarray], metadata: dict, ids: np.ndarray) -> np.ndarray:
    """Outputs for token ids `[batch, T]` (BOS first, PAD after the end): `[batch, T, n_out]`
    logits, or `[batch, T]` values for a numerical output. Float32, as the compiled model: the
    project's numpy oracle (`compiler.model.oracle`) over the tensors as stored.
    """
    activations = {int(index): name for index, name in metadata["activations"].items()}
    config, params = config_of_dense_tensors(tensors, pad_id=metadata["pad_id"], causal=metadata["causal"],
                                             numerical_output=metadata["numerical_output"], activations=activations,
                                             norm=norm_from_json(metadata.get("norm")))
    return oracle.forward(config, params, ids)
