"""The compression objective: L_out + L_layer (Tracr paper, section 5.1).

Both terms average over the *valid* positions of a batch only: BOS (position 0) and PAD
positions carry no program value and are ignored.

* ``L_out``: softmax cross-entropy of the compressed logits against the compiled model's output
  (its argmax as a one-hot label, or its softmax distribution) for categorical programs; mean
  squared error against the compiled values for numerical programs.
* ``L_layer``: sum over layers of the squared distance between the compiled model's vector and
  the compressed model's decompressed one. With ``layer_target="outputs"`` (default) the vectors
  are what each sub-layer writes into the stream — the paper's "output vectors at layer i" — taken
  as differences of consecutive residual snapshots: for the compressed model that is
  ``delta @ W @ W.T``, the sub-layer's output written through W and read back. With
  ``"residuals"`` they are the whole residual streams after each sub-layer (``r @ W.T``).
  Per position the squared distance is summed (``layer_reduction="sum"``) or averaged
  (``"mean"``) over the D coordinates, then averaged over positions.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp

from compression.learned.config import CategoricalTarget, LayerReduction, LayerTarget, LossConfig
from compression.learned.frozen import FrozenModel, OutputKind


def position_mask(ids: jax.Array, bos_id: int, pad_id: int) -> jax.Array:
    """``[B, T]`` float mask, 1 where the position holds a real input token."""
    return ((ids != bos_id) & (ids != pad_id)).astype(jnp.float32)


def _masked_mean(values: jax.Array, mask: jax.Array) -> jax.Array:
    return jnp.sum(values * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def output_loss(
    predicted: jax.Array,
    target: jax.Array,
    mask: jax.Array,
    kind: OutputKind,
    categorical_target: CategoricalTarget = "argmax",
) -> jax.Array:
    """L_out for one batch: cross-entropy (categorical) or MSE (numerical) over valid positions."""
    if kind == "numerical":
        return _masked_mean(jnp.square(predicted - target), mask)
    if categorical_target == "argmax":
        labels = jax.nn.one_hot(jnp.argmax(target, axis=-1), target.shape[-1], dtype=predicted.dtype)
    elif categorical_target == "distribution":
        labels = jax.nn.softmax(target, axis=-1)
    else:
        raise ValueError(f"unknown categorical_target {categorical_target!r}")
    per_position = -jnp.sum(labels * jax.nn.log_softmax(predicted, axis=-1), axis=-1)
    return _masked_mean(per_position, mask)


def layer_vectors(residuals: Sequence[jax.Array], target: LayerTarget, include_embedding: bool) -> list[jax.Array]:
    """The per-layer vectors L_layer compares, from residual snapshots (embedding first).

    ``"outputs"``: ``residuals[i] - residuals[i - 1]`` for every sub-layer ``i``;
    ``"residuals"``: the snapshots after each sub-layer. ``include_embedding`` prepends
    ``residuals[0]`` (the embedding's output).
    """
    if target == "outputs":
        vectors = [after - before for before, after in zip(residuals[:-1], residuals[1:])]
    elif target == "residuals":
        vectors = list(residuals[1:])
    else:
        raise ValueError(f"unknown layer_target {target!r}; use outputs or residuals")
    return ([residuals[0]] if include_embedding else []) + vectors


def layer_loss(
    predicted: Sequence[jax.Array],
    target: Sequence[jax.Array],
    mask: jax.Array,
    reduction: LayerReduction = "sum",
) -> jax.Array:
    """Sum over layers of the masked mean over positions of the squared distance.

    ``predicted``/``target`` are matching lists of ``[B, T, D]`` vectors (see
    :func:`layer_vectors`); ``reduction`` sums or averages the D coordinates.
    """
    if len(predicted) != len(target):
        raise ValueError(f"got {len(predicted)} predicted and {len(target)} target layer vectors")
    reduce = {"sum": jnp.sum, "mean": jnp.mean}.get(reduction)
    if reduce is None:
        raise ValueError(f"unknown layer_reduction {reduction!r}; use sum or mean")
    total = jnp.zeros((), jnp.float32)
    for pred, ref in zip(predicted, target):
        total = total + _masked_mean(reduce(jnp.square(pred - ref), axis=-1), mask)
    return total


def compression_loss(
    projection: jax.Array, model: FrozenModel, ids: jax.Array, config: LossConfig
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Weighted objective for one batch of ids and its parts ``{"out", "layer", "total"}``.

    The compiled model's outputs are computed here (no gradient flows into them), so the function
    needs only ids; it is what the training step differentiates with respect to ``projection``.
    """
    reference = model.forward(model.params, ids)
    ref_output = jax.lax.stop_gradient(reference.output)
    ref_residuals = [jax.lax.stop_gradient(r) for r in reference.residuals]
    compressed = model.forward(model.params, ids, projection=projection)
    mask = position_mask(ids, model.bos_id, model.pad_id)
    l_out = output_loss(compressed.output, ref_output, mask, model.output_kind, config.categorical_target)
    l_layer = layer_loss(
        layer_vectors(compressed.residuals, config.layer_target, config.include_embedding),
        layer_vectors(ref_residuals, config.layer_target, config.include_embedding),
        mask,
        config.layer_reduction,
    )
    total = config.out_weight * l_out + config.layer_weight * l_layer
    return total, {"out": l_out, "layer": l_layer, "total": total}
