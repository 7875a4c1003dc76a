"""The compiler's passes, numpy and networkx only, in pipeline order.

1. ``primitives``, ``joint_selectors``, ``discretise``, ``sums``: rewrite the RASP program
   (``length``; ``or`` over different s-ops as one joint lookup; categorical copies of numerical
   s-ops read as one-hots; ``SumAggregate`` as a mean times a count).
2. ``graph``: trace it into a networkx graph (``relabel`` makes labels unique); ``NodeKind``
   and the graph queries every pass shares.
3. ``values``: infer every s-op's value set (``positional`` keeps them per position;
   ``arithmetic`` computes LinearSequenceMaps with Python's types; ``variants`` records equal
   values of different types and refuses readers that tell them apart);
   ``readout`` reads a numerical output that can be None through a categorical copy;
   ``rounding`` lets categorical copies merge float-rounding twins no reader tells apart.
4. ``fuse``: fuse chains of elementwise operations.
5. ``validate``: refuse what cannot be compiled exactly, with the reason (``selectors``
   normalises selectors; ``numerical_maps`` measures numerical Maps, reused by lowering).
6. ``optimize``: fold, fuse and prune; ``size_estimate``: refuse a compile whose weights would
   not fit (``max_weight_bytes``) before anything is built; ``lower``: Craft blocks per s-op.
7. ``allocate``: place blocks on sub-layers (longest path or an exact MILP).
8. ``layout``: lay out the residual stream and build the embeddings: a ``CraftModel``.
``loops`` replaces steps 2-7 for a ``rasp.Loop``: the loop as a program over its state, the
   state's values as a fixed point, the body placed as one tied block ending in its commit MLP.
``qk_factor`` factors large query-key blocks for the weights.

The step after the last pass, from a ``CraftModel``'s blocks to the model's weight records
(``compiler.model.assemble``, ``compiler.model.reuse``), belongs to ``compiler.model``; nothing
here imports it, nor JAX.
"""

__all__: list[str] = []
