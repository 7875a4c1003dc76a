"""Pieces the construction families share with each other and with the compiler.

* ``in_model`` — run construction blocks inside the compiler's Haiku transformer and compare
  with the numpy Craft evaluation (through ``compiler.model.from_craft``).

The families (``superposition``, ``facts``, ``bilinear``, ``circuits``) never import one another;
what two of them need lives here.
"""

__all__: list[str] = []
