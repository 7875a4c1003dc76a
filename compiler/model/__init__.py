"""The compiled model: configuration records, the Haiku transformer, encoders, weight access.

Modules in reading order:

* ``config`` — the JAX-free records that describe a model's shapes (``ModelConfig``, per-layer
  specs, ``SparseLinear``) and the Haiku parameter keys (``ParamKey``).
* ``assemble`` — the Craft-to-weights step: a ``CraftModel``'s blocks (the passes' result) as a
  ``ModelConfig`` and numpy weights keyed like the Haiku params; JAX-free.
* ``reuse`` — opt-in residual reuse over the assembled weights: several values per coordinate.
* ``forms`` — the cost model that picks how each weight is applied (dense, rebuild, columns,
  rows, interval) per backend.
* ``projected`` — how a pass under a projection reads and writes the rows of ``W`` each
  sub-layer touches (block by block for a fixed ``W``).
* ``transformer`` — the Haiku decoder-only transformer built from a config and its weights: the
  one forward pass, with named sites to capture or hook and a start and stop snapshot.
* ``from_craft`` — the one way from a ``compiler.passes.layout.CraftModel`` to a Haiku model.
* ``encoders`` — token <-> id and output decoding.
* ``agree`` — the one rule for when a decoded output agrees with the RASP evaluator
  (``same_value``, ``AGREE_TOLERANCE``), used by every check.
* ``compiled_model`` — ``CompiledModel``, what ``compile_rasp`` returns.
* ``tying`` — ``untied``: a compiled loop's model with its tied block written out per iteration.
* ``folding`` — ``folded_model``: a compressed model (a residual projection folded into the
  weights) as an ordinary ``CompiledModel`` of the compressed width; normalised models included.
* ``jit_cache`` — ``enable_compilation_cache``: JAX's persistent compilation cache, opt-in.
* ``weights`` — reading a model's weights as matrices over the residual stream (the only place
  outside ``transformer`` that knows the Haiku parameter names).
* ``dense`` — dense labelled weights (``LabelledMatrix``, ``labelled_weights``) and the dense
  model (``dense_model``: Haiku-standard ``[D, ...]`` params), behind
  ``CompiledModel.labelled_weights()`` and ``CompiledModel.dense()``; dense tensors stored flat
  as a model again (``config_of_dense_tensors``) and the one ``fold_projection``.
* ``oracle`` — the test oracle: an independent numpy forward pass over a config and params.

Import the names from their modules (``from compiler.model.weights import head_weights``);
the entry points are re-exported by ``compiler``.
"""

__all__: list[str] = []
