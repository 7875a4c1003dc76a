"""`CircuitRecord`: a verified circuit as a frozen record and a JSON file.

One record holds one (program, variant, ablation): the components and edges of the model, each
named in the project's labels, in TransformerLens hook names (with a head index where the hook
has a head axis) and in auto-circuit's node names; the measured circuit with every edge's
effect; the structural circuit with the s-ops each edge carries; the RASP graph's s-op edges
mapped to the edges that carry them; the per-position circuit (optional); and the verification.
The JSON layout is documented in docs/circuits.md ("The JSON file").
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from typing import Any

import numpy as np

from compiler.atomic import atomic_write_text
from compiler.errors import LabError
from compiler.lab.circuits.components import Component, Edge

FORMAT = "tracr-compile circuit 2"  # 2: hooks that fire on the default export, with their weights


@dataclasses.dataclass(frozen=True)
class Verification:
    """How the circuit was checked on the sampled inputs (see `compiler.lab.circuits.measure`)."""

    sufficient: bool
    necessary: bool
    minimal: bool
    outside_changes: int  # outputs changed with every edge outside the circuit ablated
    single_outside_changes: int  # the same for the single-edge circuit
    scored_outputs: int  # (input, position) pairs whose decoded output is compared
    how_found: str

    @property
    def verified(self) -> bool:
        return self.sufficient and self.necessary


@dataclasses.dataclass(frozen=True)
class CircuitRecord:
    """Ground truth for one program, variant and ablation.

    `circuit[i]`, `effect[i]`, `structural[i]`, `carries[i]` and `positions[i]` describe
    `edges[i]`. `positions[i]` lists the destination positions at which edge i is in the
    per-position circuit (empty tuple for all when per-position was not measured:
    `per_position` is False then).
    """

    program: str
    output: str
    variant: str
    variant_note: str
    ablation: str
    distribution: dict[str, Any]
    components: tuple[Component, ...]
    edges: tuple[Edge, ...]
    circuit: tuple[bool, ...]
    effect: tuple[int, ...]
    structural: tuple[bool, ...]
    carries: tuple[tuple[str, ...], ...]
    variables: tuple[tuple[str, str, tuple[str, ...]], ...]
    per_position: bool
    positions: tuple[tuple[int, ...], ...]
    verification: Verification

    def truth(self) -> np.ndarray:
        """The circuit as a boolean array in edge order (what `scoring.score` takes)."""
        return np.asarray(self.circuit, bool)

    def edge_names(self, which: str = "circuit") -> tuple[str, ...]:
        """Names of the edges in the `"circuit"`, the `"structural"` circuit, or `"all"`."""
        mask = {"circuit": self.circuit, "structural": self.structural, "all": (True,) * len(self.edges)}[which]
        return tuple(e.name for e, on in zip(self.edges, mask) if on)

    def difference(self) -> dict[str, tuple[str, ...]]:
        """Edges structural but not measured (e.g. constants under mean ablation) and measured
        but not structural (e.g. interference in a superposed variant)."""
        return {
            "structural_only": tuple(e.name for e, c, s in zip(self.edges, self.circuit, self.structural) if s and not c),
            "measured_only": tuple(e.name for e, c, s in zip(self.edges, self.circuit, self.structural) if c and not s),
        }

    def hook_truth(self) -> dict[tuple[str, int | None, str, int | None], bool]:
        """The circuit keyed by TransformerLens hooks: (source hook, head, destination hook, head)."""
        return {(e.src_hook, e.src_hook_head, e.dst_hook, e.dst_hook_head): c for e, c in zip(self.edges, self.circuit)}

    def auto_circuit_truth(self) -> dict[str, bool]:
        """The circuit keyed by auto-circuit edge names. auto-circuit has one source for both
        embeddings ("Resid Start"); its edge is in the circuit when either of ours is."""
        truth: dict[str, bool] = {}
        for edge, on in zip(self.edges, self.circuit):
            truth[edge.auto_circuit] = truth.get(edge.auto_circuit, False) or on
        return truth

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data = {"format": FORMAT, **data}
        return json.dumps(data, indent=1, default=_plain)

    @staticmethod
    def from_json(text: str) -> CircuitRecord:
        data = json.loads(text)
        if data.pop("format", None) != FORMAT:
            raise LabError(f"not a circuit record of format {FORMAT!r}")
        data["components"] = tuple(Component(**{**c, "writes": tuple(c["writes"])}) for c in data["components"])
        data["edges"] = tuple(Edge(**e) for e in data["edges"])
        data["verification"] = Verification(**data["verification"])
        for key in ("circuit", "effect", "structural"):
            data[key] = tuple(data[key])
        data["carries"] = tuple(tuple(c) for c in data["carries"])
        data["positions"] = tuple(tuple(p) for p in data["positions"])
        data["variables"] = tuple((a, b, tuple(edges)) for a, b, edges in data["variables"])
        return CircuitRecord(**data)

    def save(self, path: str | os.PathLike) -> pathlib.Path:
        """Write the JSON file atomically; returns its path."""
        return atomic_write_text(path, self.to_json())

    @staticmethod
    def load(path: str | os.PathLike) -> CircuitRecord:
        return CircuitRecord.from_json(pathlib.Path(path).read_text(encoding="utf-8"))


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")
