"""The compiler's passes, numpy and networkx only, in pipeline order.

1. ``graph``: trace a RASP program into a networkx graph (``relabel``, ``primitives`` help).
2. ``values``: infer every s-op's value set (``positional`` keeps them per position).
3. ``selectors``: per-selector facts the later passes share.
4. ``discretise``, ``validate``: refuse what cannot be compiled, with the reason.
5. ``lower``: one Craft block per s-op; ``optimize`` folds, fuses and prunes them.
6. ``allocate``: place blocks on layers (longest path or an exact MILP).
7. ``assemble``: lay out the residual stream and turn blocks into weight records
   (``qk_factor`` factors large query-key blocks).

Nothing here imports JAX; the Haiku model lives in ``compiler.model``.
"""
