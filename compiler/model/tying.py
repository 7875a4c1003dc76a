"""Undo weight tying: a compiled loop's model as ordinary layers, one copy per iteration.

A compiled `rasp.Loop` stores its tied block once (`ModelConfig.tied`) and its forward pass
runs the block `repeats` times. Tools that expect one set of weights per layer (the
TransformerLens export, per-layer weight plots) take `untied(model)`: the same computation with
the block's layers repeated in `config.layers` and in the params, and no tying recorded.
"""

from __future__ import annotations

import dataclasses

from compiler.model.compiled_model import CompiledModel
from compiler.model.transformer import build
from compiler.model.weights import module_params


def untied(model: CompiledModel) -> CompiledModel:
    """`model` with every executed sub-layer stored on its own (itself when nothing is tied).

    Layer `j` of the result holds the weights of the `j`-th sub-layer the forward pass runs
    (`config.layer_order[j]`), so outputs, residuals and attention patterns are unchanged.
    """
    config = model.config
    if config.tied is None:
        return model
    order = config.layer_order
    weights = {module: module_params(model, module) for module in ("embed", "unembed")}
    for position, index in enumerate(order):
        weights[f"layer_{position}"] = module_params(model, f"layer_{index}")
    layers = tuple(config.layers[index] for index in order)
    flat = dataclasses.replace(config, layers=layers, tied=None)
    params, forward, _ = build(flat, weights)
    sublayers = tuple(model.sublayers[index] for index in order) if len(model.sublayers) == len(config.layers) else ()
    return dataclasses.replace(model, config=flat, params=params, forward=forward, sublayers=sublayers)


__all__ = ["untied"]
