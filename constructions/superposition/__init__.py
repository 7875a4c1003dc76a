"""Computation in superposition: U-AND MLP blocks, skip-feature-bigram heads, their errors.

Modules in reading order:

* ``seeding`` — the explicit seed every builder takes, as a numpy Generator.
* ``features`` — boolean features stored (possibly in superposition) in a labelled space.
* ``metrics`` — the accuracy and error statistics every measurement reports.
* ``readout`` — sparse readouts: each output averages a set of hidden neurons.
* ``uand`` — universal AND MLP layers; ``measure_uand`` measures them.
* ``inclusion_exclusion`` — every fan-in read from one U-AND layer.
* ``targeted`` — AND on a chosen set of gates.
* ``quadratic`` — universal AND with a quadratic activation.
* ``boolean_circuit`` — two stacked targeted layers emulating a sparse boolean circuit.
* ``sfb`` — attention heads checking skip feature-bigrams; ``measure_sfb`` measures them.
* ``craft_blocks`` — the weights above wrapped as Craft MLPs and attention heads.

Imports stay inside this family, ``craft`` and ``constructions.common``.
"""

__all__: list[str] = []
