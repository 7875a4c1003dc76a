"""A compressed model as an ordinary model: a residual projection folded into the weights.

`forward(params, ids, projection=W)` runs the compressed model through the compiled one; tools
that load a checkpoint (the Hugging Face export, a model file) need its weights instead, of the
compressed width. `folded_model(model, W)` makes that `CompiledModel`: loops unrolled, every
weight dense and folded by `compiler.model.dense.fold_projection`, the same encoders.

A normalised model folds too, through `compiler.model.norm.normalised_projection`: `W` is then
a projection of the compiled coordinates only, and the folded stream gains the norm's anchor
direction (3 coordinates for LayerNorm, 1 for RMSNorm) with an anchor sized for the compressed
stream, so each norm stays a known constant scale there as well.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from compiler.errors import CompilerError
from compiler.model.compiled_model import CompiledModel
from compiler.model.config import MLPSpec, NormSpec
from compiler.model.dense import config_of_dense_tensors, dense_tensors, fold_projection
from compiler.model.forms import choose_forms
from compiler.model.norm import compiled_width, normalised_projection
from compiler.model.transformer import build
from compiler.model.tying import untied
from craft.bases import BasisDirection, VectorSpaceWithBasis


def folded_model(model: CompiledModel, projection: np.ndarray) -> CompiledModel:
    """The model whose residual stream is the compressed one, as ordinary weights.

    Args:
      model: a compiled model (a loop is unrolled first, `untied`).
      projection: `W`: `[D, d]` over the residual stream of a model without a norm; for a
        normalised model `[D0, d]` over its compiled coordinates (D0 = D minus the norm's
        coordinates), made for `without_norm(model)` (`compression.analytic.residual_structure`
        of the normalised model reads it).
    Returns:
      A `CompiledModel` of width d (d + 3 under LayerNorm, d + 1 under RMSNorm) with the same
      encoders and program, whose outputs are those of `model.forward(..., projection=W)`
      (without a norm) or of the normalised model compressed by `W` (its norm's spread recomputed;
      `config.norm`). Its residual labels are the coordinates' numbers (and the anchor's labels).
    Raises:
      CompilerError: a `W` of the wrong shape, or one that is not finite.
    """
    w = np.asarray(projection, np.float64)
    if not np.all(np.isfinite(w)):
        raise CompilerError("the projection holds values that are not finite")
    flat = untied(model)
    config = flat.config
    norm, labels = config.norm, None
    if norm is not None:
        w, norm, labels = normalised_projection(config.residual_labels, norm, w)
    elif w.ndim != 2 or w.shape[0] != config.residual_width:
        raise CompilerError(f"a projection of this model's residual stream has {config.residual_width} rows, "
                            f"not shape {w.shape}")
    return _rebuilt(flat, w, norm, labels)


def without_norm(model: CompiledModel) -> CompiledModel:
    """A normalised model's compiled coordinates, without its norm.

    The same weights over the first D0 coordinates (its lookups as saturated as the norm built
    them; each reader's mean-blind row dropped with the always-zero coordinate it reads, the
    anchor with its coordinates), with the labels and residual space of those coordinates. Each of
    its reads is the normalised model's divided by that norm site's read factor, which the
    compiler keeps within `1 +- spread` (`compiler.model.norm`): this is the model the
    interference bound reads for a normalised one (`compression.analytic.residual_structure`),
    and what a projection for `folded_model(model, W)` is made for.

    Args:
      model: a compiled model with a norm (a loop is unrolled first, `untied`).
    Returns:
      A `CompiledModel` without a norm, of the compiled width D0.
    Raises:
      CompilerError: `model` has no norm, or its residual labels do not end with the norm's.
    """
    flat = untied(model)
    norm = flat.config.norm
    if norm is None:
        raise CompilerError("without_norm needs a model compiled with a norm (compile_rasp(..., norm=...))")
    labels = tuple(flat.config.residual_labels)
    width = compiled_width(labels, norm.kind)
    keep = np.eye(len(labels))[:, :width]
    space = VectorSpaceWithBasis(tuple(flat.residual_space.basis[:width]))
    return _rebuilt(flat, keep, None, labels[:width], space)


def _rebuilt(flat: CompiledModel, w: np.ndarray, norm: NormSpec | None, labels: tuple[str, ...] | None,
             space: VectorSpaceWithBasis | None = None) -> CompiledModel:
    """`flat` (no tied blocks) with `w` folded into its weights, as an ordinary model with `norm`;
    residual labels `labels` (else the coordinates' numbers), residual space `space` (else one
    direction per label)."""
    config = flat.config
    activations = {index: layer.activation for index, layer in enumerate(config.layers) if isinstance(layer, MLPSpec)}
    tensors = fold_projection(dense_tensors(flat), w)
    folded, stored = config_of_dense_tensors(tensors, pad_id=config.pad_id, causal=bool(config.causal),
                                             numerical_output=config.numerical_output, activations=activations,
                                             norm=norm)
    if labels is not None:
        folded = dataclasses.replace(folded, residual_labels=labels)
    weights = {key.split("/", 1)[1]: values for key, values in stored.items()}
    folded = choose_forms(folded, weights, jax.default_backend())
    params, forward, _ = build(folded, weights)
    if space is None:
        space = VectorSpaceWithBasis(tuple(BasisDirection(label) for label in folded.residual_labels))
    return dataclasses.replace(flat, params=params, config=folded, forward=forward, craft_model=None, sublayers=(),
                               residual_space=space, residual_reuse=None)


__all__ = ["folded_model", "without_norm"]
