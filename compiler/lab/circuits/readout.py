"""How a network's scored output is read: decoded outputs, changed outputs, divergences.

These are the definitions the circuit (`measure`) and the methods (`methods`) are built on,
written once for both places they run: on a network's own output shape, and inside the jitted
patching programs (`patching`), where outputs are padded to a shape bucket and `valid` masks
the padded output columns out (a padded column never wins an argmax, never reaches the empty
threshold and carries no probability).

* `decoded`: a categorical output decodes to its argmax column, or -1 ("none") where every
  logit is below the empty threshold (`threshold` None: the argmax alone); a numerical output
  is its value.
* `changed`: scored positions whose decoded output differs from the clean one (numerical:
  moved by more than `tolerance`).
* `divergence`: the mean over scored positions of the KL divergence of the patched softmax
  (with one column at the empty threshold, at inverse temperature `sharpness`) from the clean
  one, or of the absolute change of a numerical output.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["SHARP", "answer", "answer_log_probability", "changed", "decoded", "divergence", "with_empty"]

# An inverse temperature at which the softmax of a compiled one-hot model's logits follows its
# decoded output: with margins of at least 0.5 (logits 0 or 1, the empty threshold 0.5) the
# losing columns keep a probability below exp(-10).
SHARP = 20.0


def _module(array):
    """numpy for numpy arrays (no compile per shape on the host), else jax.numpy."""
    return np if isinstance(array, np.ndarray) else jnp


# numpy in, numpy out; JAX in (traced), JAX out.
Arrays = jax.Array | np.ndarray


def _masked(logits: Arrays, valid: jax.Array | None) -> Arrays:
    """`logits` with the columns outside `valid` (padded ones) at -inf."""
    return logits if valid is None else _module(logits).where(valid, logits, -np.inf)


def with_empty(logits: jax.Array, threshold: float | jax.Array | None) -> jax.Array:
    """Logits with one more column held at the empty threshold: decoding says "none" when every
    logit is below it, so the softmax sees that choice too (without it a one-column output has
    a constant softmax and no method could see it change). `threshold` None (a network decoded
    by argmax alone): the logits as they are."""
    if threshold is None:
        return logits
    empty = jnp.full(logits.shape[:-1] + (1,), threshold, logits.dtype)
    return jnp.concatenate([logits, empty], axis=-1)


def _with_empty_valid(valid: jax.Array | None, threshold) -> jax.Array | None:
    if valid is None or threshold is None:
        return valid
    return jnp.concatenate([valid, jnp.ones((1,), bool)])


def decoded(output: Arrays, numerical: bool, threshold: float | jax.Array | None,
            valid: jax.Array | None = None) -> Arrays:
    """`[...]`: the decoded output of `output` `[..., n]` (see the module docstring); numpy
    in, numpy out."""
    if numerical:
        return output[..., 0]
    xp = _module(output)
    if output.shape[-1] == 0:  # no output value at all (the program is None everywhere): all None
        return xp.full(output.shape[:-1], -1, dtype=xp.int32)
    output = _masked(output, valid)
    best = xp.argmax(output, axis=-1)
    if threshold is None:
        return best
    return xp.where(xp.max(output, axis=-1) < threshold, -1, best)


def changed(clean: jax.Array, patched: jax.Array, scored: jax.Array, numerical: bool,
            threshold: float | jax.Array | None, tolerance: float | jax.Array,
            valid: jax.Array | None = None) -> jax.Array:
    """`[..., B, T]` bool: scored positions whose decoded output differs from the clean one."""
    before = decoded(clean, numerical, threshold, valid)
    after = decoded(patched, numerical, threshold, valid)
    differs = jnp.abs(after - before) > tolerance if numerical else after != before
    return differs & scored


def divergence(clean: jax.Array, patched: jax.Array, scored: jax.Array, numerical: bool,
               threshold: float | jax.Array | None, sharpness: float | jax.Array = 1.0,
               valid: jax.Array | None = None) -> jax.Array:
    """`[...]`: mean over scored positions of how far `patched` `[..., B, T, n]` is from clean.

    Categorical outputs compare softmaxes of the logits (with the empty column) multiplied by
    `sharpness`, an inverse temperature. A compiled model's logit scale is arbitrary (scaling
    its unembedding by any positive factor changes no decoded output) and small (one-hot
    logits are 0 or 1 against a threshold of 0.5), so at sharpness 1 the softmax is soft:
    an ablation that leaves the answer but makes it more confident (logits [1, 0] -> [4, 1])
    diverges more than one that flips it to "none" ([1, 0] -> [0, 0]). At a large sharpness
    the softmax approaches the decoded output and the divergence counts flips.
    """
    if numerical:
        per_position = jnp.abs(patched[..., 0] - clean[..., 0])
    else:
        columns = _with_empty_valid(valid, threshold)
        before = jax.nn.log_softmax(_masked(sharpness * with_empty(clean, threshold), columns), axis=-1)
        after = jax.nn.log_softmax(_masked(sharpness * with_empty(patched, threshold), columns), axis=-1)
        terms = jnp.exp(before) * (before - after)
        if columns is not None:
            terms = jnp.where(columns, terms, 0.0)
        per_position = jnp.sum(terms, axis=-1)
    weight = scored.astype(jnp.float32)
    return jnp.sum(per_position * weight, axis=(-1, -2)) / jnp.maximum(weight.sum(), 1.0)


def numerical_deviation(output: jax.Array, clean: jax.Array, scored: jax.Array) -> jax.Array:
    """Minus the summed absolute deviation of a numerical `output` from the `clean` one over the
    scored positions: the metric integrated gradients differentiate for numerical outputs. (The
    summed value `answer_log_probability` reads cancels under resample ablation, which permutes
    the inputs, so its change along the path integrates to nearly 0 for every edge.)"""
    return -jnp.sum(jnp.abs(output[..., 0] - clean[..., 0]) * scored.astype(jnp.float32))


def answer(clean: jax.Array, threshold: float | jax.Array | None, valid: jax.Array | None = None) -> jax.Array:
    """`[..., B, T]`: the column the clean output decodes to among its columns and the empty one
    (the last column: "none"), the answer `answer_log_probability` reads."""
    return jnp.argmax(_masked(with_empty(clean, threshold), _with_empty_valid(valid, threshold)), axis=-1)


def answer_log_probability(output: jax.Array, answer: jax.Array, scored: jax.Array, numerical: bool,
                           threshold: float | jax.Array | None, valid: jax.Array | None = None) -> jax.Array:
    """The metric attribution patching differentiates: summed over scored positions, the
    log-probability of the clean `answer` column (with the empty column), or the numerical
    output's value."""
    if numerical:
        values = output[..., 0]
    else:
        columns = _with_empty_valid(valid, threshold)
        log_p = jax.nn.log_softmax(_masked(with_empty(output, threshold), columns), axis=-1)
        values = jnp.take_along_axis(log_p, answer[..., None], axis=-1)[..., 0]
    return jnp.sum(values * scored.astype(jnp.float32))
