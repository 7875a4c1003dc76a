"""Ground truth a method can be scored against, computed from compiled models.

Modules (sub-packages), in reading order:

* ``circuits``: the circuit of a compiled model under a stated ablation, measured by patching and
  verified (sufficiency and necessity), the difficulty dial of model variants, reference
  discovery methods and their scores.
* ``features``: the true dictionary of a compiled, compressed model at any site, and a
  sparse-autoencoder benchmark built on it.
"""

__all__: list[str] = []
