"""Experiment scripts for the constructions package (run with ``python -m``).

* ``attention_capacity`` — the attention-capacity toy experiment (``facts``) at a 2-core size,
  printed beside the paper's numbers.

Scripts sit on top of the families and may import any of them; nothing imports a script.
"""

__all__: list[str] = []
