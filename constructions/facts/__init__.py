"""Fact storage: (subject, predicate, object) databases written into attention layers.

Modules in reading order:

* ``database`` — fact databases and their 0/1 three-tensors.
* ``db_rank`` — rank bounds of a database tensor, with rank-one witnesses; ``cp_als`` fits
  them numerically.
* ``attention_layer`` — one-layer attention-only models in numpy, and their token circuits.
* ``layer_tensor`` — the three-tensor such a layer computes on (subject, predicate) prompts.
* ``metrics`` — recall accuracy (argmax, softmax >= tau) and rank witnesses.
* ``examples`` — the hand-built circuits of the paper's worked examples.
* ``model`` — a fact table compiled into Craft attention blocks; ``haiku_model`` runs them in
  the compiler's Haiku transformer.
* ``capacity_training`` — trains small layers on random databases (JAX, optax).

Imports stay inside this family, ``craft``, ``constructions.common`` and ``compiler.model``.
"""

__all__: list[str] = []
