"""From a program to verified circuit records: variant, sample, measure, verify, record.

`circuit_records(program, vocab, max_seq_len, variant=..., ablations=...)` builds the variant
once and returns one `CircuitRecord` per ablation; `measured(...)` also returns the patching
setups, which the methods and the benchmark reuse.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence

import numpy as np

from compiler.lab.circuits.ablation import ABLATIONS, InputDistribution, check_ablation
from compiler.lab.circuits.components import Component
from compiler.lab.circuits.measure import Measured, PatchingSetup, measure_circuit, setup
from compiler.lab.circuits.record import CircuitRecord, Verification
from compiler.lab.circuits.structural import structural_edges
from compiler.lab.circuits.variants import Variant, make_variant
from rasp import rasp


@dataclasses.dataclass(frozen=True, eq=False)
class Measurement:
    """One ablation of one variant: the setup (for methods), the measured circuit and the record."""

    setup: PatchingSetup
    measured: Measured
    record: CircuitRecord


def record_of(variant: Variant, program: rasp.SOp, s: PatchingSetup, measured: Measured,
              distribution: InputDistribution, per_position: Measured | None = None) -> CircuitRecord:
    """The `CircuitRecord` of a measured circuit (and optionally its per-position circuit).

    Args:
        variant: the variant measured: its network, compiled model, name and note.
        program: the RASP program; its label names the record's program and scored output.
        s: the patching setup the circuit was measured on (inputs, ablation, scored positions).
        measured: the whole-edge circuit measured on `s` (`measure_circuit(s)`).
        distribution: the input distribution `s.ids` was drawn from, stored in the record.
        per_position: the per-position circuit of the same setup
            (`measure_circuit(s, per_position=True)`), or None for none.
    Returns:
        The `CircuitRecord`: components, edges, measured and structural circuits, the s-ops
        each edge carries, the positions (per position only) and the verification.
    """
    net = variant.net
    structure = structural_edges(variant.model, output=str(program.label), net=variant.exact_net)
    positions: tuple[tuple[int, ...], ...] = tuple(() for _ in net.edges)
    if per_position is not None:
        grid = per_position.circuit.reshape(len(net.edges), s.length)
        positions = tuple(tuple(int(t) for t in np.nonzero(row)[0]) for row in grid)
    config = variant.model.config
    return CircuitRecord(
        program=str(program.label),
        output=str(program.label),
        variant=variant.name,
        variant_note=variant.note,
        ablation=s.ablation,
        distribution={**dataclasses.asdict(distribution), "max_seq_len": config.max_seq_len,
                      "vocab": [repr(v) for v in variant.model.input_encoder.vocab]},
        components=net.sources + (Component("unembed", "unembed", hook=net.ports[-1].hook, auto_circuit="Resid End"),),
        edges=net.edges,
        circuit=tuple(bool(c) for c in measured.circuit),
        effect=tuple(int(e) for e in measured.effect),
        structural=tuple(bool(c) for c in structure.edges),
        carries=structure.carries,
        variables=structure.variables,
        per_position=per_position is not None,
        positions=positions,
        verification=Verification(
            sufficient=measured.sufficient,
            necessary=measured.all_necessary,
            minimal=measured.minimal,
            outside_changes=measured.outside_changes,
            single_outside_changes=measured.single_outside_changes,
            scored_outputs=int(np.asarray(s.scored).sum()),
            how_found=measured.how_found,
        ),
    )


def measured(variant: Variant, program: rasp.SOp, distribution: InputDistribution,
             ablations: Sequence[str] = ABLATIONS, per_position: bool = False) -> list[Measurement]:
    """Measure, verify and record the circuit of `variant` under each ablation.

    Args:
        variant: the variant (`make_variant`).
        program: the RASP program the variant was built from.
        distribution: the sampled inputs, drawn once and shared by every ablation.
        ablations: the ablations to measure under, in order.
        per_position: also measure each ablation's per-position circuit.
    Returns:
        One `Measurement` (setup, measured circuit, record) per ablation, in the order of
        `ablations`.
    Raises:
        LabError: an ablation is unknown, or `distribution` cannot be drawn (fewer than 2
            inputs, `min_length` outside `[1, max_seq_len]`); both before anything is measured.
    """
    checked = [check_ablation(ablation) for ablation in ablations]
    ids = distribution.ids(variant.model)
    found = []
    for ablation in checked:
        s = setup(variant.net, ids, ablation)
        circuit = measure_circuit(s)
        positions = measure_circuit(s, per_position=True) if per_position else None
        found.append(Measurement(s, circuit, record_of(variant, program, s, circuit, distribution, positions)))
    return found


def circuit_records(program: rasp.SOp, vocab: Sequence[Hashable], max_seq_len: int, *, variant: str = "a",
                    ablations: Sequence[str] = ABLATIONS, distribution: InputDistribution | None = None,
                    per_position: bool = False, seed: int = 0) -> list[CircuitRecord]:
    """One verified `CircuitRecord` per ablation of `program`'s `variant`.

    Args:
        program: the RASP program (its label names the scored output).
        vocab, max_seq_len: what it is compiled for.
        variant: the dial setting ("a" .. "h", letters joined by '+'; see `variants`).
        ablations: any of "zero", "mean", "resample".
        distribution: the sampled inputs (default: 64 inputs, seed 0).
        per_position: also measure the per-position circuit.
        seed: seeds the variant (distractors, GD, reparametrisation).
    Returns:
        One `CircuitRecord` per ablation, in the order of `ablations`.
    Raises:
        LabError: an unknown ablation (checked before anything is built), a variant
            `make_variant` refuses, or a distribution that cannot be drawn (fewer than 2 inputs,
            `min_length` outside `[1, max_seq_len]`).
    """
    for ablation in ablations:
        check_ablation(ablation)
    distribution = distribution or InputDistribution()
    built = make_variant(variant, program, tuple(vocab), max_seq_len, seed=seed,
                         unique_tokens=distribution.unique_tokens)
    return [m.record for m in measured(built, program, distribution, ablations, per_position)]
