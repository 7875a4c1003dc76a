"""Name what each attention head computes, and what the optimisation passes folded into it.

A head is identified by the s-ops whose residual directions its `W_OV` writes; the compiled
graph then says what the passes recorded on those s-ops (`compiler.passes.optimize.describe`).
Models loaded from a file have no graph: their heads get no note.
"""

from __future__ import annotations

import numpy as np

from compiler.model.compiled_model import CompiledModel
from compiler.model.config import AttentionSpec
from compiler.model.weights import head_weights
from compiler.passes.optimize.describe import node_notes


def written_sops(model: CompiledModel, sublayer: int, head: int) -> tuple[str, ...]:
    """Labels of the s-ops whose directions head `head` of sub-layer `sublayer` writes."""
    if model.graph is None:
        return ()
    w_ov = head_weights(model, sublayer, head).w_ov
    columns = np.flatnonzero(np.any(w_ov != 0, axis=0))
    names = {model.residual_space.basis[c].name for c in columns}
    return tuple(sorted(name for name in names if name in model.graph))


def head_note(model: CompiledModel, sublayer: int, head: int) -> str:
    """`writes X (what the passes folded into it)` for a head an optimisation pass changed;
    empty for any other head (and without a graph)."""
    written = written_sops(model, sublayer, head)
    notes = {label: node_notes(model.graph, label) for label in written}
    if not any(notes.values()):
        return ""
    return ", ".join(
        f"writes {label}" + (f" ({'; '.join(notes[label])})" if notes[label] else "") for label in written
    )


def head_notes(model: CompiledModel) -> list[str]:
    """`layer L head H: <note>` for every head an optimisation pass changed."""
    lines = []
    for index, layer in enumerate(model.config.layers):
        if isinstance(layer, AttentionSpec):
            for head in range(len(layer.heads)):
                note = head_note(model, index, head)
                if note:
                    lines.append(f"layer {index // 2} head {head}: {note}")
    return lines
