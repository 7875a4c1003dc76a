"""Pre-norm models: a LayerNorm or RMSNorm before every sub-layer and before the unembedding.

A norm divides the stream by its own size, which a compiled model's values do not have: the
size of the residual vector changes from input to input and from layer to layer (which s-ops
are set, what numbers they hold). The compiled model makes each norm a known constant scale
instead, in two steps that add a few coordinates and change no weight's values:

* **Mean zero** (LayerNorm only): a *balance* coordinate holds minus the sum of every other
  coordinate. Every weight that writes the stream (the embeddings, each head's output map, each
  MLP's output) gets one more output column, minus the sum of its row, so the stream's sum is 0
  at every position after every sub-layer; the norm's centring then subtracts nothing.
* **A dominant anchor**: the token embedding writes a constant `A` into an *anchor* coordinate
  (and `-A` into a *counter* coordinate for LayerNorm, so the sum stays 0) at every position.
  No weight reads them. The squared size of the stream is then `n A^2 + r^2`, with `n` the
  anchor coordinates (2 or 1) and `r^2` the rest, whose bound `R` the compiler derives from the
  value sets (`compiler.passes.norm_budget`). With `A` large against `R`, the norm's divisor
  `sqrt((n A^2 + r^2) / D + eps)` stays within `1 +- spread` of one constant, the norm's gain
  `scale`: each sub-layer reads `x * scale / divisor`, the compiled input times a factor in
  `[1 - spread, 1 + spread]`.

`spread` is computed exactly from `A`, `R`, `D` and `eps` (`norm_spec`); `A` is the smallest
that brings it to `NORM_SPREAD`. ReLU MLPs without biases (the compiler's: a bias is a read of
the constant `one` coordinate) are positively homogeneous, so an MLP's output is scaled by the
same factor; an attention head's values are, and its scores by the factor squared.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import sparse

from compiler.errors import CompilerError
from compiler.model.config import (
    NORMS,
    AttentionSpec,
    HeadSpec,
    LayerSpec,
    MLPSpec,
    ModelConfig,
    NormSpec,
    SparseLinear,
    layer_module,
)

Weights = dict[str, dict[str, np.ndarray]]

# The epsilon of every norm site: GPT-2's and TransformerLens' default.
NORM_EPS = 1e-5
# The worst relative deviation of a norm's divisor from its gain that the anchor is sized for.
NORM_SPREAD = 1e-5
# The labels of the coordinates a normalised model adds after the compiled ones.
ANCHOR, COUNTER, BALANCE = "norm_anchor", "norm_counter", "norm_balance"


def norm_labels(kind: str) -> tuple[str, ...]:
    """The residual labels the norm `kind` adds: anchor, counter and balance for LayerNorm,
    the anchor alone for RMSNorm (which subtracts no mean)."""
    return (ANCHOR, COUNTER, BALANCE) if kind == "layernorm" else (ANCHOR,)


def _spread(anchors: int, anchor: float, budget: float, width: int, eps: float) -> tuple[float, float]:
    """`(scale, spread)` for an anchor of magnitude `anchor` on `anchors` coordinates of a
    stream of `width` coordinates whose other coordinates have squared size in `[0, budget]`:
    the gain is the divisor at the middle of that range, the spread its worst relative distance
    from the divisor at either end."""
    low = math.sqrt(anchors * anchor**2 / width + eps)
    high = math.sqrt((anchors * anchor**2 + budget) / width + eps)
    scale = math.sqrt((anchors * anchor**2 + budget / 2) / width + eps)
    return scale, max(scale / low - 1.0, 1.0 - scale / high)


def norm_spec(kind: str, width: int, budget: float, *, eps: float = NORM_EPS, spread: float = NORM_SPREAD) -> NormSpec:
    """The norm of a model whose compiled coordinates (`width` of them) have squared size at most
    `budget` (for LayerNorm: their squares plus the square of their sum, which the balance
    coordinate holds), with the anchor sized so that the divisor's spread is at most `spread`.

    Raises:
      CompilerError: an unknown `kind`, or a budget that is negative or not finite.
    """
    if kind not in NORMS:
        raise CompilerError(f"norm={kind!r} is not a normalisation; use one of {NORMS} or None")
    if not (math.isfinite(budget) and budget >= 0):
        raise CompilerError(f"the residual stream's size bound is {budget!r}; a norm needs a finite bound")
    anchors, total = (2 if kind == "layernorm" else 1), width + len(norm_labels(kind))
    # spread ~ budget / (4 anchors A^2): start there and grow A until the exact spread fits
    anchor = max(1.0, math.sqrt(budget / (4 * anchors * spread)))
    scale, found = _spread(anchors, anchor, budget, total, eps)
    while found > spread:
        anchor *= 1.01
        scale, found = _spread(anchors, anchor, budget, total, eps)
    return NormSpec(kind, scale, eps, anchor, found)


def _matrix(spec: SparseLinear, param: np.ndarray) -> np.ndarray | sparse.csr_array:
    """The weight's matrix over its own coordinates (scipy sparse for sparse storage)."""
    if not spec.is_sparse:
        return np.asarray(param, np.float64)
    rows, cols = spec.pattern
    return sparse.csr_array((np.asarray(param, np.float64), (rows, cols)), shape=spec.shape)


def _balanced(spec: SparseLinear, param: np.ndarray, width: int, balance: int | None) -> tuple[SparseLinear, np.ndarray]:
    """A weight that writes the stream, over the widened stream: its columns placed as before
    and, with `balance`, one more column there holding minus each row's sum."""
    out_idx = tuple(range(width)) if spec.out_idx is None else spec.out_idx
    if balance is None:
        return dataclasses.replace(spec, out_idx=out_idx, form=None), param
    matrix = _matrix(spec, param)
    column = -np.asarray(matrix.sum(axis=1), np.float64).reshape(-1, 1)
    widened = (sparse.hstack([matrix, sparse.csr_array(column)], format="csr") if sparse.issparse(matrix)
               else np.hstack([matrix, column]))
    return SparseLinear.from_matrix(widened, in_idx=spec.in_idx, out_idx=(*out_idx, balance))


def _reading(spec: SparseLinear, width: int) -> SparseLinear:
    """A weight that reads the stream, over the widened stream (it reads no new coordinate)."""
    return spec if spec.in_idx is not None else dataclasses.replace(spec, in_idx=tuple(range(width)), form=None)


def with_norm(config: ModelConfig, weights: Weights, kind: str, budget: float) -> tuple[ModelConfig, Weights]:
    """`config` and `weights` as a pre-norm model (module docstring): the norm coordinates
    appended to the residual stream, the embeddings writing the anchor (and, for LayerNorm, every
    writer the balance), and `config.norm` the `NormSpec`.

    Args:
      config, weights: an assembled model without a norm (weights keyed like the Haiku params).
      kind: "layernorm" or "rmsnorm".
      budget: a bound on the squared size of the compiled coordinates at any position and
        snapshot (LayerNorm: plus the square of their sum), `compiler.passes.norm_budget`.
    Returns:
      The new config (forms to be chosen again) and weights.
    Raises:
      CompilerError: `config` already has a norm or a tied block was laid out without room,
        a residual label that clashes with a norm label, or a bad `kind` / `budget`.
    """
    if config.norm is not None:
        raise CompilerError("the model already has a norm")
    labels = norm_labels(kind) if kind in NORMS else ()
    clash = sorted(set(labels) & set(config.residual_labels))
    if clash:
        raise CompilerError(f"an s-op is labelled {clash[0]!r}, a label the norm coordinates use; rename it")
    width = config.residual_width
    spec = norm_spec(kind, width, budget)
    total = width + len(labels)
    balance = width + 2 if kind == "layernorm" else None
    new: Weights = {module: dict(values) for module, values in weights.items()}

    token = config.token_embed.full_matrix(weights["embed"]["token"], config.vocab_size, width).astype(np.float64)
    position = config.pos_embed.full_matrix(weights["embed"]["position"], config.max_seq_len + 1, width)
    anchor_columns = [np.full((len(token), 1), spec.anchor)]
    if kind == "layernorm":
        anchor_columns += [np.full((len(token), 1), -spec.anchor), -token.sum(axis=1, keepdims=True)]
    token_spec, new["embed"]["token"] = SparseLinear.from_matrix(np.hstack([token, *anchor_columns]))
    position = position.astype(np.float64)
    extra = [np.zeros((len(position), 2)), -position.sum(axis=1, keepdims=True)] if kind == "layernorm" else [
        np.zeros((len(position), 1))]
    pos_spec, new["embed"]["position"] = SparseLinear.from_matrix(np.hstack([position, *extra]))

    layers: list[LayerSpec] = []
    for index, layer in enumerate(config.layers):
        module = new[layer_module(index)]
        if isinstance(layer, AttentionSpec):
            heads = []
            for h, head in enumerate(layer.heads):
                w_o, module[f"head_{h}_o"] = _balanced(head.w_o, module[f"head_{h}_o"], width, balance)
                heads.append(HeadSpec(_reading(head.w_q, width), _reading(head.w_k, width), _reading(head.w_v, width), w_o))
            layers.append(AttentionSpec(tuple(heads)))
        else:
            w_out, module["w_out"] = _balanced(layer.w_out, module["w_out"], width, balance)
            layers.append(MLPSpec(_reading(layer.w_in, width), w_out, layer.activation))
    unembed = _reading(config.unembed, width)
    normalised = dataclasses.replace(
        config, residual_labels=(*config.residual_labels, *labels), layers=tuple(layers), token_embed=token_spec,
        pos_embed=pos_spec, unembed=unembed, norm=spec, backend=None,
    )
    assert normalised.residual_width == total
    return normalised, new


__all__ = ["ANCHOR", "BALANCE", "COUNTER", "NORM_EPS", "NORM_SPREAD", "norm_labels", "norm_spec", "with_norm"]
