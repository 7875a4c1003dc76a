"""What the compiled model's values can be: their ranges, float rounding, and its own noise.

Three things the interference bound needs besides the weights, all derived from them:

* **range**: the smallest and largest value of every coordinate over every input, propagated in
  execution order: the embedding tables' entries; a head writes a mixture of its values, so
  within their range; a ReLU unit between 0 and its largest pre-activation (one value per s-op
  on); a number piece its outputs at its number's values. A number never leaves its value set
  (where the compiled model's graph gives it). Categorical values are 0 or 1 (their class size
  where alike values share a direction).
* **rounding**: how much float32 rounding (unit ``u = 2^-24``) each sub-layer can add, with
  ``n`` the terms of a sum: a hidden unit's pre-activation ``u (n + 1) Σ |a_j| |x_j|``, an MLP
  output ``u (n + 1) Σ_units |w| h_max`` plus the addition into the stream; a head's scores
  ``u (n_q + n_k + r + 2)`` times the largest sum of the absolute terms of a score (which move
  every weight by a factor within ``e^{±2σ}``, counted with the head's σ), and what it writes:
  the softmax and the mixture's own ``u (2T + 6)`` relative, plus the value read's ``u (n + 1)``,
  times the largest value.
* **noise**: how far the compiled float32 model is from exact arithmetic on every input: the
  bound's own :func:`~compression.analytic.bound.walk` run without a projection, starting from
  exact values and adding each sub-layer's rounding. A lookup's off units stay exactly 0 and its
  on units pass their inputs' noise on; a steep numerical MLP multiplies it by its slope.

A normalised model (``compile_rasp(..., norm=...)``) is read over its compiled coordinates
(:func:`compiler.model.folding.without_norm`); each of its norm sites multiplies what the next
sub-layer reads by a factor within ``1 ± s`` (``read_factor``), which enters as more rounding:
``s Σ |a_j| |x_j|`` on a hidden unit's pre-activation, ``(2s + s²)`` times the largest score
sum on a head's scores (queries and keys are both scaled), ``s`` relative on what a head
writes, and ``s`` times the largest logit on the unembedding.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy import sparse

from compiler import CompiledModel
from compiler.model import weights
from compression.analytic.bound import walk
from compression.analytic.readers import FLOAT32_UNIT, Errors, compiled_ranges, reader_parts
from compression.analytic.view import AttentionRounding, MLPRounding, MLPView, ModelView, Noise

U = FLOAT32_UNIT


def calibrated(view: ModelView, compiled: CompiledModel, read_factor: float = 0.0) -> ModelView:
    """``view`` with its value ranges, rounding and noise (module docstring); ``read_factor``:
    the ``s`` of a model whose every read is scaled by a factor within ``1 ± s`` (0 for none)."""
    low, high = value_ranges(view, compiled)
    view = dataclasses.replace(view, low=low, high=high)
    view = _with_rounding(view, compiled.config.max_seq_len + 1, compiled, read_factor)
    with np.errstate(over="ignore", invalid="ignore"):
        found = walk(view, None)
    return dataclasses.replace(view, noise=tuple(_noise(view, errors) for errors in (*found.before, found.errors)))


def _noise(view: ModelView, found: Errors) -> Noise:
    """The compiled model's noise from the errors of the walk against exact arithmetic."""
    errors = found.absolute(view.magnitude)
    largest = errors.largest()
    on = np.maximum(np.abs(errors.on_lo), np.abs(errors.on_hi))
    off = np.maximum(np.abs(errors.off_lo), np.abs(errors.off_hi))
    categorical = view.categorical
    return Noise(np.where(categorical, on, largest), np.where(categorical, off, largest), found.largest(),
                 np.maximum(np.abs(found.scale_lo), np.abs(found.scale_hi)))


def value_ranges(view: ModelView, compiled: CompiledModel) -> tuple[np.ndarray, np.ndarray]:
    """The smallest and largest value of every coordinate over every input (module docstring)."""
    categorical = view.categorical
    tokens, positions = weights.token_embedding(compiled), weights.position_embedding(compiled)
    low = tokens.min(axis=0) + positions.min(axis=0)
    high = tokens.max(axis=0) + positions.max(axis=0)
    low[categorical], high[categorical] = 0.0, view.amplification[categorical]

    def clip() -> None:
        for i, values in view.values.items():  # a number never leaves its value set
            low[i], high[i] = max(low[i], values.min()), min(high[i], values.max())

    clip()
    numeric = ~categorical
    for sublayer in view.sublayers:
        written_lo, written_hi = np.zeros_like(low), np.zeros_like(high)
        if isinstance(sublayer, MLPView):
            if sublayer.activation not in ("relu", "identity"):
                written_lo[:], written_hi[:] = -np.inf, np.inf
            else:
                lo, hi = compiled_ranges(view, low, high, sublayer.w_in)
                if sublayer.activation == "relu":
                    lo, hi = np.zeros_like(lo), np.maximum(hi, 0.0)
                positive, negative = sublayer.w_out.maximum(0), (-sublayer.w_out).maximum(0)
                written_lo = positive.T @ lo - negative.T @ hi
                written_hi = positive.T @ hi - negative.T @ lo
                for piece in sublayer.pieces:  # a piece is evaluated at the values its number takes
                    outputs = np.vstack([piece(piece.values), np.zeros((1, piece.writes.size))])
                    written_lo[piece.writes], written_hi[piece.writes] = outputs.min(axis=0), outputs.max(axis=0)
        else:
            for head in sublayer:
                lo, hi = compiled_ranges(view, low, high, head.ov)  # a mixture of values stays within their range
                np.add.at(written_lo, head.writes, np.minimum(lo, 0.0))
                np.add.at(written_hi, head.writes, np.maximum(hi, 0.0))
        low = low + np.where(numeric, written_lo, 0.0)
        high = high + np.where(numeric, written_hi, 0.0)
        clip()
    return low, high


def _largest(view: ModelView, matrix) -> np.ndarray:
    lo, hi = compiled_ranges(view, view.low, view.high, matrix)
    return np.maximum(np.abs(lo), np.abs(hi))


def _terms_per_state(view: ModelView, matrix) -> int:
    """Most non-zero terms a read by ``matrix`` sums in one state: one per s-op it reads (its
    other values are off), one per number and one for ``one``."""
    rows = np.asarray(abs(matrix).sum(axis=1)).ravel() != 0
    groups = len(set(view.group_of[rows & view.categorical].tolist()))
    return groups + int(np.sum(rows & ~view.categorical))


def _largest_score(view: ModelView, head) -> float:
    """The largest ``Σ_ij |x_i| |W_Q W_Kᵀ|_ij |x_j|`` over the states of query and key: a bound on
    the sum of the absolute terms of any score."""
    absolute = sparse.csc_array(abs(head.w_q) @ abs(head.w_k).T)  # [queries, keys], non-negative
    used = np.nonzero(np.asarray(absolute.sum(axis=0)).ravel())[0]
    if not used.size:
        return 0.0
    per_key = np.zeros(view.residual_dim)
    per_key[used] = compiled_ranges(view, -view.magnitude, view.magnitude, absolute[:, used])[1]
    total = 0.0
    for coords in view.groups:
        total += float((per_key[coords] * view.magnitude[coords]).max(initial=0.0))
    numeric = ~view.categorical
    return total + float(np.sum(per_key[numeric] * view.magnitude[numeric]))


def _column_terms(matrix) -> np.ndarray:
    return np.diff(matrix.indptr) if matrix.shape[1] else np.zeros(0, np.int64)


def _with_rounding(view: ModelView, positions: int, compiled: CompiledModel, read_factor: float) -> ModelView:
    """``view`` with each sub-layer's float rounding and the norm's read factor (module docstring)."""
    s = read_factor
    stream = U * view.magnitude  # adding an output into the stream
    out: list[MLPRounding | AttentionRounding] = []
    for sublayer in view.sublayers:
        if isinstance(sublayer, MLPView):
            parts = reader_parts(view, None, sublayer.w_in)
            _, high = parts.compiled_range()
            absolute = abs(sublayer.w_in).T @ view.magnitude
            units = (U * (_column_terms(sublayer.w_in) + 1) + s) * absolute
            terms = np.diff(sublayer.w_out.tocsc().indptr)
            written = terms > 0
            outputs = U * (terms + 1) * (abs(sublayer.w_out).T @ np.maximum(high, 0.0)) + np.where(written, stream, 0.0)
            out.append(MLPRounding(units, outputs))
        else:
            scores, outputs = [], []
            for head in sublayer:
                terms = head.w_q.shape[1] + _terms_per_state(view, head.w_q) + _terms_per_state(view, head.w_k) + 2
                sigma = (U * terms + 2 * s + s * s) * _largest_score(view, head)
                values = _largest(view, head.ov)
                # (the scores' rounding moves the weights; the walk counts it with the head's σ)
                relative = U * (2 * positions + 6) + U * (_column_terms(head.ov) + 1) + s
                scores.append(sigma)
                outputs.append(relative * values + stream[head.writes])
            out.append(AttentionRounding(np.asarray(scores), tuple(outputs)))
    unembed = (U * (_column_terms(view.unembed) + 1) + s) * _largest(view, view.unembed)
    # the embedding adds a token's row to a position's: exact where only one of them writes
    both = np.any(weights.token_embedding(compiled) != 0, axis=0) & np.any(weights.position_embedding(compiled) != 0, axis=0)
    embedding = np.where(both, stream, 0.0)
    return dataclasses.replace(view, rounding=tuple(out), embedding_rounding=embedding, unembed_rounding=unembed)
