"""Hand-built weights with known mechanisms, beside the compiler's RASP programs.

* ``superposition``: Universal-AND MLPs, skip-feature-bigram attention and their measurements.
* ``facts``: fact storage in attention layers (databases, constructions, capacity).
* ``bilinear``: bilinear layers, exact gates and their Craft form.
* ``circuits``: QK/OV circuit analysis of attention-only models, compiled ones included.
* ``common``: what they share, e.g. running Craft blocks inside the compiler's Haiku model.
"""

__all__: list[str] = []
