"""Circuit analysis (QK, OV, path expansion) of attention-only models, compiled ones included.

Modules in reading order:

* ``factored`` — low-rank matrices kept as a product until asked for.
* ``attention_only`` — attention-only models as explicit matrices; token-level QK/OV tables.
* ``path_expansion`` — the forward pass split into direct and (virtual) head paths.
* ``to_craft`` — the same head weights read from Craft attention blocks.
* ``compiled`` — the same head weights read from a compiled model (``compiler.model.weights``).

Imports stay inside this family, ``craft`` and ``compiler.model``.
"""

__all__: list[str] = []
