"""The compression objective: the paper's L_out + L_layer (section 5.1), and one that prefers exact models.

Every term averages over the *valid* positions of a batch only: BOS (position 0) and PAD
positions carry no program value and are ignored.

The paper's objective (``LossConfig()``):

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

That objective can prefer a wrong model to an exact one. A W that stores values in superposition
(``W Wᵀ`` not the identity) reads every value right and still pays ``L_layer``, because
``delta @ W @ W.T`` differs from ``delta``; and cross-entropy keeps pushing correct logits apart
when the compiled model's own logits are only 1 apart. On ``length`` at 10/10 an exact packed W
had a higher loss than a W that outputs a constant. The exactness objective
(``LossConfig.exact()``) is built from terms that are 0 when the model reads right:

* ``categorical_target="margin"``: per position, with ``g`` the logit gap (the compiled argmax's
  logit minus the largest other) of the compressed model and ``g_ref`` the compiled model's, the
  squared hinge ``relu(margin * g_ref - g)**2 / g_ref**2``: zero once the right value wins by a
  margin, whatever the logits' scale. The decoder also reads a position as None when its largest
  logit is below ``EMPTY_THRESHOLD`` (1/2), so the same hinge keeps the right logit above the
  threshold by ``margin`` of the compiled logit's distance to it, and where the compiled model
  outputs None keeps every logit below it likewise;
* ``layer_target="written"``: per sub-layer, what it computes in residual coordinates *before* W
  writes it (``ModelOutput.written``) against the compiled sub-layer output: a thresholded lookup
  whose pre-activations keep their sign writes exactly the compiled output. Compared coordinate
  by coordinate it is not 0 at every exact W, though: a superposed code may read an off value
  negative (``±e`` codes), which a copy passes on, and a lookup reading such values may write an
  on value larger; thresholded readers and the unembedding's argmax read both right. With
  ``written_margin`` (the default of :meth:`LossConfig.exact`) the one-hot coordinates
  (``FrozenModel.one_hot``) count only deviations towards the other side (:func:`written_margin`),
  which makes the exact packed W of ``dyck1`` at its packed width cost 0 instead of 5.0;
* ``attention_weight``: the KL divergence of the compressed attention patterns from the compiled
  ones, i.e. a term on the attention logits that is 0 when every head attends as compiled;
* ``hidden_weight``: a margin on the pre-activations of every ReLU MLP (``ModelOutput.hidden``).
  The written term alone has a trap: a thresholded lookup (e.g. the MLP that turns a selector
  width's ``1/(k+1)`` into ``k``) is a sum of ReLU pairs whose misfired pairs both sit on their
  linear piece, so their wrong output is proportional to how strongly ``one`` is read, and the
  cheapest way for GD to shrink it is to read ``one`` (and everything else) weaker, not to move
  the threshold back. On ``length`` that reaches a minimum with two lengths of five wrong. The
  hinge asks each pre-activation ``z`` to stay on its compiled side of 0 with ``hidden_margin``
  of its compiled value ``z_ref``: ``relu(hidden_margin |z_ref| - sign(z_ref) z)² / z_ref²``,
  zero for every W that keeps the signs with that margin; units with ``z_ref = 0`` (a lookup's
  off rows) are left to the written term.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from compiler.errors import CompressionError
from compiler.model.encoders import EMPTY_THRESHOLD
from compression.learned.config import CategoricalTarget, LayerReduction, LayerTarget, LossConfig
from compression.learned.frozen import FrozenModel, OutputKind

# A compiled logit gap below this is a tie up to rounding: no winner for the margin term to keep.
TIE_GAP = 1e-3


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
    margin: float = 0.5,
) -> jax.Array:
    """L_out for one batch: cross-entropy or logit-gap margin (categorical) or MSE (numerical)
    over valid positions."""
    if kind == "numerical":
        return _masked_mean(jnp.square(predicted - target), mask)
    if categorical_target == "margin":
        return margin_loss(predicted, target, mask, margin)
    if categorical_target == "argmax":
        labels = jax.nn.one_hot(jnp.argmax(target, axis=-1), target.shape[-1], dtype=predicted.dtype)
    elif categorical_target == "distribution":
        labels = jax.nn.softmax(target, axis=-1)
    else:
        raise CompressionError(f"unknown categorical_target {categorical_target!r}")
    per_position = -jnp.sum(labels * jax.nn.log_softmax(predicted, axis=-1), axis=-1)
    return _masked_mean(per_position, mask)


def output_balance(target: jax.Array, mask: jax.Array) -> jax.Array:
    """``[B, T]`` weights: 1 / the number of valid positions whose compiled output (argmax of
    ``target``, ``[B, T, n_out]``) is the same value, so each value present weighs the same."""
    labels = jax.nn.one_hot(jnp.argmax(target, axis=-1), target.shape[-1], dtype=jnp.float32)
    counts = jnp.sum(labels * mask[..., None], axis=(0, 1))
    return 1.0 / jnp.maximum(jnp.sum(labels * counts, axis=-1), 1.0)


def logit_gap(logits: jax.Array, label: jax.Array) -> jax.Array:
    """``logits[label] - max(other logits)`` per position (``label``: ``[...]`` int indices)."""
    right = jnp.take_along_axis(logits, label[..., None], axis=-1)[..., 0]
    others = jnp.where(jax.nn.one_hot(label, logits.shape[-1], dtype=bool), -jnp.inf, logits)
    return right - jnp.max(others, axis=-1)


def margin_loss(predicted: jax.Array, target: jax.Array, mask: jax.Array, margin: float) -> jax.Array:
    """Squared hinge on the compressed logit gap below ``margin`` times the compiled gap, relative to
    the compiled gap (positions where the compiled model has no clear winner, gap below
    ``TIE_GAP``, rounding of a tie, or has one class are skipped), plus the same hinge on the
    decoder's threshold (:func:`threshold_loss`)."""
    if target.shape[-1] < 1:
        return jnp.zeros((), jnp.float32)
    beyond = threshold_loss(predicted, target, mask, margin)
    if target.shape[-1] < 2:
        return beyond
    label = jnp.argmax(target, axis=-1)
    reference = logit_gap(target, label)
    clear = reference > TIE_GAP
    safe = jnp.where(clear, reference, 1.0)
    shortfall = jax.nn.relu(margin * safe - logit_gap(predicted, label)) / safe
    return _masked_mean(jnp.where(clear, jnp.square(shortfall), 0.0), mask * clear) + beyond


def threshold_loss(predicted: jax.Array, target: jax.Array, mask: jax.Array, margin: float) -> jax.Array:
    """Squared hinge keeping each position on the compiled side of the decoder's threshold
    ``EMPTY_THRESHOLD``: the compiled argmax's logit above it by ``margin`` of the compiled
    logit's distance to it where the compiled model outputs a value, every logit below it
    likewise where it outputs None; relative to that distance."""
    top = jnp.max(target, axis=-1)
    distance = jnp.maximum(jnp.abs(top - EMPTY_THRESHOLD), TIE_GAP)
    shown = top >= EMPTY_THRESHOLD
    label = jnp.argmax(target, axis=-1)
    right = jnp.take_along_axis(predicted, label[..., None], axis=-1)[..., 0]
    below = jnp.where(shown, EMPTY_THRESHOLD + margin * distance - right, jnp.max(predicted, axis=-1)
                      - (EMPTY_THRESHOLD - margin * distance))
    return _masked_mean(jnp.square(jax.nn.relu(below) / distance), mask)


def attention_loss(predicted: Sequence[jax.Array], target: Sequence[jax.Array], mask: jax.Array) -> jax.Array:
    """Sum over attention sub-layers of ``KL(compiled pattern || compressed pattern)``, averaged
    over heads and valid query positions (patterns ``[B, H, T, T]``, mask ``[B, T]``)."""
    total = jnp.zeros((), jnp.float32)
    for pred, ref in zip(predicted, target):
        if pred.shape[-3] == 0:  # a sub-layer without heads
            continue
        kl = jnp.sum(jnp.where(ref > 0, ref * (jnp.log(jnp.where(ref > 0, ref, 1.0)) - jnp.log(pred + 1e-30)), 0.0),
                     axis=-1)  # [B, H, T]
        total = total + _masked_mean(jnp.mean(kl, axis=-2), mask)
    return total


def hidden_loss(predicted: Sequence[jax.Array], target: Sequence[jax.Array], mask: jax.Array,
                margin: float) -> jax.Array:
    """Sum over ReLU MLP sub-layers of the mean squared relative shortfall of the pre-activations
    from their compiled side of 0 (see the module docstring), over units with a non-zero compiled
    value and valid positions (pre-activations ``[B, T, H]``, mask ``[B, T]``)."""
    total = jnp.zeros((), jnp.float32)
    for pred, ref in zip(predicted, target):
        if pred.shape[-1] == 0:
            continue
        signed = jnp.abs(ref) > TIE_GAP
        safe = jnp.where(signed, jnp.abs(ref), 1.0)
        shortfall = jax.nn.relu(margin * safe - jnp.sign(ref) * pred) / safe
        per_position = jnp.sum(jnp.where(signed, jnp.square(shortfall), 0.0), axis=-1) / jnp.maximum(
            jnp.sum(signed, axis=-1), 1)
        total = total + _masked_mean(per_position, mask)
    return total


def layer_vectors(residuals: Sequence[jax.Array], target: LayerTarget, include_embedding: bool) -> list[jax.Array]:
    """The per-layer vectors L_layer compares, from residual snapshots (embedding first).

    ``"outputs"``: ``residuals[i] - residuals[i - 1]`` for every sub-layer ``i``;
    ``"residuals"``: the snapshots after each sub-layer. ``include_embedding`` prepends
    ``residuals[0]`` (the embedding's output).
    """
    if target in ("outputs", "written"):  # "written": the compiled model's outputs are the same
        vectors = [after - before for before, after in zip(residuals[:-1], residuals[1:])]
    elif target == "residuals":
        vectors = list(residuals[1:])
    else:
        raise CompressionError(f"unknown layer_target {target!r}; use outputs, residuals or written")
    return ([residuals[0]] if include_embedding else []) + vectors


def written_margin(predicted: jax.Array, reference: jax.Array, one_hot: Sequence[int]) -> jax.Array:
    """``predicted`` (``[..., D]`` written outputs) with its one-hot coordinates moved to the
    compiled value where they deviate away from the other side: an off value (compiled 0) below 0
    and an on value above its compiled value count as right, so the squared distance to
    ``reference`` is ``relu(v)²`` off and ``relu(c - v)²`` on. Superposed codes give exact models
    such writes (a copy passes a value read negative on; a lookup reading an on value twice writes
    it larger), and the readers of one-hot values, thresholded, read them right."""
    mask = np.zeros(predicted.shape[-1], bool)
    mask[list(one_hot)] = True  # static: elementwise selects, no gather or scatter
    clipped = jnp.where(reference > 0.5, jnp.minimum(predicted, reference), jnp.maximum(predicted, reference))
    return jnp.where(mask, clipped, predicted)


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
        raise CompressionError(f"got {len(predicted)} predicted and {len(target)} target layer vectors")
    reduce = {"sum": jnp.sum, "mean": jnp.mean}.get(reduction)
    if reduce is None:
        raise CompressionError(f"unknown layer_reduction {reduction!r}; use sum or mean")
    total = jnp.zeros((), jnp.float32)
    for pred, ref in zip(predicted, target):
        total = total + _masked_mean(reduce(jnp.square(pred - ref), axis=-1), mask)
    return total


def compression_loss(
    projection: jax.Array, model: FrozenModel, ids: jax.Array, config: LossConfig
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Weighted objective for one batch of ids and its parts ``{"out", "layer", "total"}`` (plus
    ``"attention"`` and ``"hidden"`` when those terms are on).

    The compiled model's outputs are computed here (no gradient flows into them), so the function
    needs only ids; it is what the training step differentiates with respect to ``projection``.
    """
    # the compiled model's pre-activations come back only with a projection: the identity
    reference = model.forward(model.params, ids, **(
        {"projection": jnp.eye(model.residual_dim, dtype=jnp.float32)} if config.hidden_weight else {}))
    ref_output = jax.lax.stop_gradient(reference.output)
    ref_residuals = [jax.lax.stop_gradient(r) for r in reference.residuals]
    compressed = model.forward(model.params, ids, projection=projection)
    mask = position_mask(ids, model.bos_id, model.pad_id)
    if config.balance_outputs and model.output_kind == "categorical":
        mask = mask * output_balance(ref_output, mask)
    l_out = output_loss(compressed.output, ref_output, mask, model.output_kind, config.categorical_target,
                        config.margin)
    reference_layers = layer_vectors(ref_residuals, config.layer_target, config.include_embedding)
    if config.layer_target == "written":
        # the embedding reads nothing, so what it computes is the compiled embedding: no term
        predicted = list(compressed.written)
        reference_layers = reference_layers[len(reference_layers) - len(predicted):]
        if config.written_margin and model.one_hot:
            predicted = [written_margin(p, r, model.one_hot) for p, r in zip(predicted, reference_layers)]
    else:
        predicted = layer_vectors(compressed.residuals, config.layer_target, config.include_embedding)
    l_layer = layer_loss(predicted, reference_layers, mask, config.layer_reduction)
    total = config.out_weight * l_out + config.layer_weight * l_layer
    parts = {"out": l_out, "layer": l_layer}
    if config.attention_weight:  # static: the paper's objective never touches the patterns
        l_attention = attention_loss(compressed.attention, [jax.lax.stop_gradient(a) for a in reference.attention],
                                     mask)
        total = total + config.attention_weight * l_attention
        parts["attention"] = l_attention
    if config.hidden_weight:
        l_hidden = hidden_loss(compressed.hidden, [jax.lax.stop_gradient(h) for h in reference.hidden], mask,
                               config.hidden_margin)
        total = total + config.hidden_weight * l_hidden
        parts["hidden"] = l_hidden
    return total, {**parts, "total": total}
