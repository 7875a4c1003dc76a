"""Bilinear layers: the interaction tensor, exact Boolean gates, Craft blocks.

Modules in reading order:

* ``layer`` — bilinear layers ``(h W + b) * (h V + c)`` and their interaction three-tensor.
* ``gates`` — exact boolean functions computed by one bilinear layer.
* ``to_craft`` — bilinear layers as Craft MLPs (``activation="bilinear"``).

Imports stay inside this family and ``craft``.
"""

__all__: list[str] = []
