"""A tiny hand-built frozen transformer honouring the compiled model's forward contract.

It computes ``frac_prevs`` (fraction of ``x`` tokens at or before each position) over vocab
{a, b, c, x} with max_seq_len 5, laid out like a compiled model: one orthogonal residual direction
per feature, four sub-layers (attention no-op, MLP ``is_x``, attention ``frac_prevs``, MLP no-op),
and ``forward(params, ids, projection=None)`` returning ``.output`` and ``.residuals``. The
output is numerical (``frac_prevs``) or, with ``categorical=True``, logits over the tokens.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from compression.learned.frozen import FrozenModel
from compression.learned.sampling import InputSpace

VOCAB = ("a", "b", "c", "x")
MAX_SEQ_LEN = 5
TOKEN_IDS = (0, 1, 2, 3)
BOS_ID, PAD_ID = 4, 5
LABELS = (
    "frac_prevs", "indices:0", "indices:1", "indices:2", "indices:3", "indices:4", "is_x", "one",
    "tokens:BOS", "tokens:PAD", "tokens:a", "tokens:b", "tokens:c", "tokens:x",
)
COLDNESS = 100.0


class FakeOutput(NamedTuple):
    output: jax.Array
    residuals: tuple[jax.Array, ...]


def _idx(label: str) -> int:
    return LABELS.index(label)


def build_params(categorical: bool = False) -> dict[str, np.ndarray]:
    """Weights in numpy, one direction per feature."""
    d = len(LABELS)
    tok = np.zeros((6, d), np.float32)
    for tid, name in zip(range(6), ("a", "b", "c", "x", "BOS", "PAD")):
        tok[tid, _idx(f"tokens:{name}")] = 1.0
        tok[tid, _idx("one")] = 1.0
    pos = np.zeros((MAX_SEQ_LEN + 1, d), np.float32)
    for p in range(1, MAX_SEQ_LEN + 1):
        pos[p, _idx(f"indices:{p - 1}")] = 1.0
    # MLP computing is_x = relu(tokens:x), zero at BOS by construction.
    mlp_in = np.zeros((d, 1), np.float32)
    mlp_in[_idx("tokens:x"), 0] = 1.0
    mlp_out = np.zeros((1, d), np.float32)
    mlp_out[0, _idx("is_x")] = 1.0
    # Attention: query index i selects key index j <= i; BOS key gets half a logit from "one".
    qk = np.zeros((d, d), np.float32)
    for i in range(MAX_SEQ_LEN):
        for j in range(i + 1):
            qk[_idx(f"indices:{i}"), _idx(f"indices:{j}")] = 1.0
    qk[_idx("one"), _idx("tokens:BOS")] = 0.5
    ov = np.zeros((d, d), np.float32)
    ov[_idx("is_x"), _idx("frac_prevs")] = 1.0
    if categorical:
        unembed = np.zeros((d, len(VOCAB)), np.float32)
        for k, name in enumerate(VOCAB):
            unembed[_idx(f"tokens:{name}"), k] = 1.0
    else:
        unembed = np.zeros((d, 1), np.float32)
        unembed[_idx("frac_prevs"), 0] = 1.0
    return {"token_embed": tok, "pos_embed": pos, "mlp_in": mlp_in, "mlp_out": mlp_out,
            "qk": qk * COLDNESS, "ov": ov, "unembed": unembed}


def forward(params, ids, projection=None) -> FakeOutput:
    """Four sub-layers; with ``projection`` W it writes through ``W`` and reads through ``W.T``."""
    write = (lambda v: v) if projection is None else (lambda v: v @ projection)
    read = (lambda r: r) if projection is None else (lambda r: r @ projection.T)
    seq = ids.shape[1]
    stream = write(params["token_embed"][ids] + params["pos_embed"][:seq][None])
    residuals = [read(stream)]
    # attention 0 and MLP 1 of the last block are no-ops (zero deltas), as in the compiled model
    stream = stream + write(jnp.zeros_like(residuals[0]))
    residuals.append(read(stream))
    h = read(stream)
    stream = stream + write(jax.nn.relu(h @ params["mlp_in"]) @ params["mlp_out"])
    residuals.append(read(stream))
    h = read(stream)
    scores = jnp.einsum("bqd,de,bke->bqk", h, params["qk"], h)
    scores = jnp.where((ids == PAD_ID)[:, None, :], -1e9, scores)
    attn = jax.nn.softmax(scores, axis=-1)
    stream = stream + write(jnp.einsum("bqk,bkd->bqd", attn, h @ params["ov"]))
    residuals.append(read(stream))
    stream = stream + write(jnp.zeros_like(residuals[0]))
    residuals.append(read(stream))
    logits = read(stream) @ params["unembed"]
    output = logits if params["unembed"].shape[1] > 1 else logits[..., 0]
    return FakeOutput(output, tuple(residuals))


def frozen_model(categorical: bool = False) -> FrozenModel:
    """The fake as a :class:`FrozenModel`."""
    params = jax.tree_util.tree_map(jnp.asarray, build_params(categorical))
    return FrozenModel(forward, params, LABELS, "categorical" if categorical else "numerical", BOS_ID, PAD_ID)


def input_space(**overrides) -> InputSpace:
    """The fake's valid inputs."""
    fields = dict(vocab=VOCAB, token_ids=TOKEN_IDS, max_seq_len=MAX_SEQ_LEN, bos_id=BOS_ID, pad_id=PAD_ID)
    fields.update(overrides)
    return InputSpace(**fields)


def reference_frac_prevs(tokens: list[str]) -> list[float]:
    """Ground truth for the numerical fake."""
    out, count = [], 0
    for i, t in enumerate(tokens):
        count += t == "x"
        out.append(count / (i + 1))
    return out
