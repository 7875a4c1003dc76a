"""Ground truth built on compiled models, for judging interpretability methods.

Sub-packages: ``features`` (the true dictionary of a compiled, compressed model at any site, and
a sparse-autoencoder benchmark built on it).
"""

__all__: list[str] = []
