"""Computed features in superposition: a ground-truth benchmark for dictionary learning.

Modules, in reading order: ``sites`` (where activations are read, spliced forward passes).
"""

__all__: list[str] = []
