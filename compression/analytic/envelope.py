"""What the compiled model's values can be: magnitudes, float rounding, and its own noise.

Three things the interference bound needs besides the weights, all derived from them:

* **magnitude**: a bound on ``|x_i|`` over every input, propagated in execution order: the
  embedding tables' largest entries; a head writes a mixture of its values, so at most their
  largest; a ReLU unit at most its largest pre-activation (one value per s-op on). Categorical
  values are 1 (their class size where alike values share a direction).
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


def calibrated(view: ModelView, compiled: CompiledModel) -> ModelView:
    """``view`` with its magnitudes, rounding and noise (module docstring)."""
    view = dataclasses.replace(view, magnitude=magnitudes(view, compiled))
    view = _with_rounding(view, compiled.config.max_seq_len + 1)
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


def magnitudes(view: ModelView, compiled: CompiledModel) -> np.ndarray:
    """A bound on ``|x_i|`` per coordinate over every input (module docstring)."""
    categorical = view.categorical
    bound = np.abs(weights.token_embedding(compiled)).max(axis=0) + np.abs(weights.position_embedding(compiled)).max(axis=0)
    bound[categorical] = view.amplification[categorical]
    numeric = ~categorical
    for sublayer in view.sublayers:
        written = np.zeros_like(bound)
        if isinstance(sublayer, MLPView):
            if sublayer.activation not in ("relu", "identity"):
                written[:] = np.inf
            else:
                lo, hi = compiled_ranges(view, bound, sublayer.w_in)
                top = np.maximum(hi, 0.0) if sublayer.activation == "relu" else np.maximum(np.abs(lo), np.abs(hi))
                written = abs(sublayer.w_out).T @ top
        else:
            for head in sublayer:
                lo, hi = compiled_ranges(view, bound, head.ov)  # a mixture of values stays within their range
                np.add.at(written, head.writes, np.maximum(np.abs(lo), np.abs(hi)))
        bound = bound + np.where(numeric, written, 0.0)
    return bound


def _largest(view: ModelView, matrix) -> np.ndarray:
    lo, hi = compiled_ranges(view, view.magnitude, matrix)
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
    per_key[used] = compiled_ranges(view, view.magnitude, absolute[:, used])[1]
    total = 0.0
    for coords in view.groups:
        total += float((per_key[coords] * view.magnitude[coords]).max(initial=0.0))
    numeric = ~view.categorical
    return total + float(np.sum(per_key[numeric] * view.magnitude[numeric]))


def _column_terms(matrix) -> np.ndarray:
    return np.diff(matrix.indptr) if matrix.shape[1] else np.zeros(0, np.int64)


def _with_rounding(view: ModelView, positions: int) -> ModelView:
    """``view`` with each sub-layer's float rounding (module docstring)."""
    stream = U * view.magnitude  # adding an output into the stream
    out = []
    for sublayer in view.sublayers:
        if isinstance(sublayer, MLPView):
            parts = reader_parts(view, None, sublayer.w_in)
            _, high = parts.compiled_range()
            absolute = abs(sublayer.w_in).T @ view.magnitude
            units = U * (_column_terms(sublayer.w_in) + 1) * absolute
            terms = np.diff(sublayer.w_out.tocsc().indptr)
            written = terms > 0
            outputs = U * (terms + 1) * (abs(sublayer.w_out).T @ np.maximum(high, 0.0)) + np.where(written, stream, 0.0)
            out.append(MLPRounding(units, outputs))
        else:
            scores, outputs = [], []
            for head in sublayer:
                terms = head.w_q.shape[1] + _terms_per_state(view, head.w_q) + _terms_per_state(view, head.w_k) + 2
                sigma = U * terms * _largest_score(view, head)
                values = _largest(view, head.ov)
                # (the scores' rounding moves the weights; the walk counts it with the head's σ)
                relative = U * (2 * positions + 6) + U * (_column_terms(head.ov) + 1)
                scores.append(sigma)
                outputs.append(relative * values + stream[head.writes])
            out.append(AttentionRounding(np.asarray(scores), tuple(outputs)))
    unembed = U * (_column_terms(view.unembed) + 1) * _largest(view, view.unembed)
    embedding = np.where(view.categorical, 0.0, stream)
    return dataclasses.replace(view, rounding=tuple(out), embedding_rounding=embedding, unembed_rounding=unembed)
