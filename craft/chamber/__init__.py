"""The block library: one builder per RASP operation kind, returning Craft blocks.

Modules: ``categorical_mlp`` (lookup tables), ``numerical_mlp`` (discretising MLPs) and
``numerical_fit`` (the exact or most accurate numerical Map construction), ``categorical_attn``
(selector heads), ``selector_width`` (the width head and its clean-up MLP), ``counted_sum``
(a mean times a one-hot count: the sum a SumAggregate computes), ``definedness`` (the none flag
of numerical s-ops that can be None, and gating MLPs by it).
"""

__all__: list[str] = []
