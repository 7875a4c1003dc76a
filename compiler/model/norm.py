"""Pre-norm models: a LayerNorm or RMSNorm before every sub-layer and before the unembedding.

A norm divides the stream by its own size, which a compiled model's values do not have: the
size of the residual vector changes from input to input and from layer to layer (which s-ops
are set, what numbers they hold). The compiled model makes each norm a known constant scale
instead, by adding a few coordinates; no compiled weight changes value:

* **A dominant anchor**: the token embedding writes a constant `A` into an *anchor* coordinate
  at every position (and `-A` into a *counter* coordinate for LayerNorm, so the anchor adds
  nothing to the stream's sum). No weight reads them. The stream's squared size (for LayerNorm:
  `D var(x)`, which the centring can only lower below `sum(x^2)`) is then `n A^2 + r^2` with `n`
  the anchor coordinates (2 or 1) and `r^2` in `[0, R]`, `R` the bound on the other coordinates
  that the compiler derives from the value sets (`compiler.passes.norm_budget`). With `A` large
  against `R`, the divisor `sqrt(var(x) + eps)` stays within `1 +- spread` of one constant, the
  norm's gain `scale`: each sub-layer reads its compiled input times a factor in
  `[1 - spread, 1 + spread]` (`norm_spec` computes `spread` exactly; `A` is the smallest that
  brings it to `NORM_SPREAD`).
* **Readers blind to the mean** (LayerNorm only): a *zero* coordinate that nothing writes holds 0
  everywhere, and every weight that reads the stream (query, key, value, MLP input, unembedding)
  reads it with minus the sum of its other rows, so each reader's rows sum to zero and it
  ignores any multiple of the all-ones vector. LayerNorm's centring subtracts the stream's mean,
  a multiple of it; and computing that mean rounds (the anchor's `+A` and `-A` cancel only when
  added to each other: torch's CPU LayerNorm was measured off by 5e-5 relative at `A = 2,738`),
  which readers therefore never see.

Lookup MLPs are saturated under a norm (`craft.chamber.categorical_mlp.saturated`), so the
factor's deviations do not compound: a ReLU MLP without biases (the compiler's: a bias is a read
of the constant `one` coordinate) is positively homogeneous and a saturated lookup writes
exactly the factor times its clean output. An attention head's values are scaled by the factor,
its scores by the factor squared.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
from scipy import linalg as scipy_linalg
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
ANCHOR, COUNTER, ZERO = "norm_anchor", "norm_counter", "norm_zero"


def read_factor(norm: NormSpec, stream: np.ndarray) -> np.ndarray:
    """`[...]`: the factor `gain / sqrt(var(x) + eps)` a norm site multiplies each position's
    stream `x` (`[..., D]`, centred first for LayerNorm) by, in float64; the compiler keeps it in
    `[1 - spread, 1 + spread]` on every reachable stream."""
    x = np.asarray(stream, np.float64)
    if norm.kind == "layernorm":
        x = x - x.mean(axis=-1, keepdims=True)
    return norm.scale / np.sqrt(np.mean(x * x, axis=-1) + norm.eps)


def anchor_coordinates(labels: Sequence[str]) -> tuple[int, ...]:
    """The coordinates of residual `labels` that the token embedding writes the anchor into (the
    anchor, and the counter of a LayerNorm); none in a model without a norm."""
    return tuple(i for i, label in enumerate(labels) if label in (ANCHOR, COUNTER))


def norm_labels(kind: str) -> tuple[str, ...]:
    """The residual labels the norm `kind` adds: anchor, counter and zero for LayerNorm, the
    anchor alone for RMSNorm (which subtracts no mean)."""
    return (ANCHOR, COUNTER, ZERO) if kind == "layernorm" else (ANCHOR,)


def compiled_width(labels: Sequence[str], kind: str) -> int:
    """The number of compiled coordinates of a model normalised by `kind` with residual `labels`:
    all but the norm's, which `with_norm` appends last.

    Raises:
      CompilerError: labels that do not end with the norm's coordinates.
    """
    extra = norm_labels(kind)
    if tuple(labels[-len(extra):]) != extra:
        raise CompilerError(f"the residual labels do not end with the {kind}'s coordinates {extra}")
    return len(labels) - len(extra)


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
    `budget`, with the anchor sized so that the divisor's spread is at most `spread`.

    Raises:
      CompilerError: an unknown `kind`, or a budget that is negative or not finite.
    """
    if kind not in NORMS:
        raise CompilerError(f"norm={kind!r} is not a normalisation; use one of {NORMS} or None")
    if not (math.isfinite(budget) and budget >= 0):
        raise CompilerError(f"the residual stream's size bound is {budget!r}; a norm needs a finite bound")
    return _sized(kind, width + len(norm_labels(kind)), budget, eps, spread)


def _sized(kind: str, total: int, budget: float, eps: float, spread: float) -> NormSpec:
    """The norm of a stream of `total` coordinates, anchor included, whose other part has squared
    size at most `budget`: the smallest anchor (to 1 %) whose divisor's spread is at most `spread`."""
    anchors = 2 if kind == "layernorm" else 1
    # spread ~ budget / (4 anchors A^2): start there and grow A until the exact spread fits
    anchor = max(1.0, math.sqrt(budget / (4 * anchors * spread)))
    scale, found = _spread(anchors, anchor, budget, total, eps)
    while found > spread:
        anchor *= 1.01
        scale, found = _spread(anchors, anchor, budget, total, eps)
    return NormSpec(kind, scale, eps, anchor, found, budget)


def normalised_projection(labels: Sequence[str], spec: NormSpec, projection: np.ndarray
                          ) -> tuple[np.ndarray, NormSpec, tuple[str, ...]]:
    """A residual projection of a normalised model that keeps each norm a known constant scale.

    A projection `W` (`[D0, d]`) of the compiled coordinates (all but the norm's, which come
    last: `compiler.model.folding.without_norm`) becomes `W'` over the whole normalised stream (`[D, d + k]`, k = 3 for
    LayerNorm, 1 for RMSNorm), such that the compressed stream `x @ W'`:

    * keeps what `W` keeps: the compiled part goes through `W` and then an isometry `N` of
      `R^d` into the first coordinates (for LayerNorm into `R^(d+1)`, orthogonal to its all-ones
      vector), so every reader sees the same numbers as the model's compiled coordinates
      compressed by `W` (`W' W'ᵀ = W Wᵀ` on the compiled rows);
    * holds the anchor on coordinates of its own (labelled `ANCHOR`, `COUNTER`: `+A'` and `-A'`
      exactly, which no folded reader reads, so their size costs no rounding in any read), with
      `A'` sized afresh for the compressed stream, whose compiled part has squared size at most
      `||W||_2^2` times the model's budget;
    * has mean zero at every position (LayerNorm), so LayerNorm's centring subtracts nothing, and
      the folded readers are blind to the mean as the model's own are.

    Args:
      labels: the normalised model's residual labels (norm coordinates last, `with_norm`).
      spec: its norm.
      projection: `W`, `[D0, d]` with `D0` the number of compiled coordinates.
    Returns:
      `(W', spec', labels')`: the projection (float64), the compressed stream's norm and the
      compressed coordinates' labels (their numbers, then the anchor's).
    Raises:
      CompilerError: labels without the norm's coordinates last, or a `W` whose rows do not match
        the compiled coordinates.
    """
    extra = norm_labels(spec.kind)
    labels = tuple(labels)
    width = compiled_width(labels, spec.kind)
    w = np.asarray(projection, np.float64)
    if w.ndim != 2 or w.shape[0] != width:
        raise CompilerError(f"a projection of this normalised model's compiled coordinates has {width} rows (the "
                            f"compiled coordinates, all but the norm's), not shape {w.shape}")
    if not math.isfinite(spec.budget):
        raise CompilerError("this norm does not record its budget, so the compressed stream's anchor cannot be sized")
    d = w.shape[1]
    budget = float(np.linalg.norm(w, 2) ** 2) * spec.budget if w.size else 0.0
    if spec.kind == "layernorm":  # d + 1 coordinates of mean zero for the compiled part, then the anchor's 2
        first, isometry = d + 1, scipy_linalg.null_space(np.ones((1, d + 1)))  # [d + 1, d], orthonormal
    else:
        first, isometry = d, np.eye(d)
    anchors = 2 if spec.kind == "layernorm" else 1
    total = first + anchors
    compressed = _sized(spec.kind, total, budget, spec.eps, NORM_SPREAD)
    result = np.zeros((len(labels), total))
    result[:width, :first] = w @ isometry.T
    ratio = compressed.anchor / spec.anchor
    for k in range(anchors):  # the anchor (and counter) coordinate: +A (-A) becomes +A' (-A')
        result[width + k, first + k] = ratio
    names = (*(str(i) for i in range(first)), *extra[:anchors])
    return result, compressed, names


def padded_norm(spec: NormSpec, width: int) -> NormSpec:
    """`spec` for the same stream padded with zero coordinates to `width` in all (an export whose
    sizes must be uniform): the same anchor and budget, the gain and spread of the wider stream
    (zeros change neither the sum nor the sum of squares, only the mean's divisor).

    Raises:
      CompilerError: a spec without its budget (one read from an older file).
    """
    if not math.isfinite(spec.budget):
        raise CompilerError("this norm does not record its budget, so its gain cannot be recomputed for another width")
    anchors = 2 if spec.kind == "layernorm" else 1
    scale, found = _spread(anchors, spec.anchor, spec.budget, width, spec.eps)
    return dataclasses.replace(spec, scale=scale, spread=found)


def _matrix(spec: SparseLinear, param: np.ndarray) -> np.ndarray | sparse.csr_array:
    """The weight's matrix over its own coordinates (scipy sparse for sparse storage)."""
    if not spec.is_sparse:
        return np.asarray(param, np.float64)
    rows, cols = spec.pattern
    return sparse.csr_array((np.asarray(param, np.float64), (rows, cols)), shape=spec.shape)


def _placed(spec: SparseLinear, width: int) -> SparseLinear:
    """A weight that writes the stream, over the widened stream (it writes no new coordinate)."""
    return spec if spec.out_idx is not None else dataclasses.replace(spec, out_idx=tuple(range(width)), form=None)


def _blind(spec: SparseLinear, param: np.ndarray, width: int, zero: int | None) -> tuple[SparseLinear, np.ndarray]:
    """A weight that reads the stream, over the widened stream: with `zero`, one more row there
    holding minus each column's sum, so its rows sum to zero (module docstring)."""
    in_idx = tuple(range(width)) if spec.in_idx is None else spec.in_idx
    if zero is None:
        return dataclasses.replace(spec, in_idx=in_idx, form=None), param
    matrix = _matrix(spec, param)
    row = -np.asarray(matrix.sum(axis=0), np.float64).reshape(1, -1)
    widened = (sparse.vstack([matrix, sparse.csr_array(row)], format="csr") if sparse.issparse(matrix)
               else np.vstack([matrix, row]))
    return SparseLinear.from_matrix(widened, in_idx=(*in_idx, zero), out_idx=spec.out_idx)


def with_norm(config: ModelConfig, weights: Weights, kind: str, budget: float) -> tuple[ModelConfig, Weights]:
    """`config` and `weights` as a pre-norm model (module docstring): the norm coordinates
    appended to the residual stream, the token embedding writing the anchor (and, for LayerNorm,
    every reader reading the zero coordinate), and `config.norm` the `NormSpec`.

    Args:
      config, weights: an assembled model without a norm (weights keyed like the Haiku params).
      kind: "layernorm" or "rmsnorm".
      budget: a bound on the squared size of the compiled coordinates at any position and
        snapshot (`compiler.passes.norm_budget`).
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
    zero = width + 2 if kind == "layernorm" else None
    new: Weights = {module: dict(values) for module, values in weights.items()}

    token = config.token_embed.full_matrix(weights["embed"]["token"], config.vocab_size, width)
    position = config.pos_embed.full_matrix(weights["embed"]["position"], config.max_seq_len + 1, width)
    anchors = [spec.anchor, -spec.anchor, 0.0][: len(labels)]
    token_spec, new["embed"]["token"] = SparseLinear.from_matrix(
        np.hstack([token, np.tile(np.asarray(anchors, np.float32), (len(token), 1))]))
    pos_spec, new["embed"]["position"] = SparseLinear.from_matrix(
        np.hstack([position, np.zeros((len(position), len(labels)), np.float32)]))

    layers: list[LayerSpec] = []
    for index, layer in enumerate(config.layers):
        module = new[layer_module(index)]
        if isinstance(layer, AttentionSpec):
            heads = []
            for h, head in enumerate(layer.heads):
                reads = {}
                for part in "qkv":
                    reads[part], module[f"head_{h}_{part}"] = _blind(
                        getattr(head, f"w_{part}"), module[f"head_{h}_{part}"], width, zero)
                heads.append(HeadSpec(reads["q"], reads["k"], reads["v"], _placed(head.w_o, width)))
            layers.append(AttentionSpec(tuple(heads)))
        else:
            w_in, module["w_in"] = _blind(layer.w_in, module["w_in"], width, zero)
            layers.append(MLPSpec(w_in, _placed(layer.w_out, width), layer.activation))
    unembed, new["unembed"]["w_u"] = _blind(config.unembed, weights["unembed"]["w_u"], width, zero)
    normalised = dataclasses.replace(
        config, residual_labels=(*config.residual_labels, *labels), layers=tuple(layers), token_embed=token_spec,
        pos_embed=pos_spec, unembed=unembed, norm=spec, backend=None,
    )
    assert normalised.residual_width == total
    return normalised, new


__all__ = ["ANCHOR", "COUNTER", "ZERO", "NORM_EPS", "NORM_SPREAD", "anchor_coordinates", "compiled_width", "norm_labels", "norm_spec",
           "normalised_projection", "padded_norm", "read_factor", "with_norm"]
