"""Text and JSON descriptions of a compiled model and of one run, for the CLI."""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from compiler.cli.head_notes import head_notes
from compiler.model.compiled_model import ApplyResult, CompiledModel
from compiler.model.config import AttentionSpec, MLPSpec, ModelConfig
from compiler.model.weights import parameter_counts
from compiler.passes.optimize import applied

# Entries whose change between two residual snapshots exceeds this count as changed.
CHANGE_TOLERANCE = 1e-6


def _output_kind(model: CompiledModel) -> str:
    """"numerical" or "categorical"; for several programs, each output's label and kind."""
    parts = model.output_parts
    if len(parts) == 1:
        return "numerical" if parts[0].numerical else "categorical"
    kinds = (f"{part.label} ({'numerical' if part.numerical else 'categorical'})" for part in parts)
    return f"{len(parts)} programs: " + ", ".join(kinds)


def changed_entries(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Boolean mask of the entries that differ by more than `CHANGE_TOLERANCE`."""
    return np.abs(np.asarray(after) - np.asarray(before)) > CHANGE_TOLERANCE


def jsonable(value: Any) -> Any:
    """Tokens and decoded values as JSON data (tuples and sets become lists)."""
    if isinstance(value, (tuple, list, frozenset, set)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def model_summary(model: CompiledModel) -> dict[str, Any]:
    """Layers, residual width, heads, MLP widths, parameter counts, labels and encoders."""
    config = model.config
    stored, nonzero = parameter_counts(model)
    return {
        "layers": config.num_layers,
        "sublayers": [_stored_name(config, index) for index in range(len(config.layers))],
        # A compiled loop: the layers stored once and run `repeats` times (None: no tying).
        "tied": None if config.tied is None else {
            "layers": [config.tied.start // 2, config.tied.stop // 2 - 1],
            "repeats": config.tied.repeats,
            "executed_layers": config.num_executed_layers,
        },
        "residual_width": config.residual_width,
        "heads": [len(layer.heads) for layer in config.layers if isinstance(layer, AttentionSpec)],
        "mlp_hidden": [layer.w_in.shape[1] for layer in config.layers if isinstance(layer, MLPSpec)],
        "parameters": {"total": stored, "nonzero": nonzero},
        "labels": list(config.residual_labels),
        "vocab": jsonable(list(model.input_encoder.vocab)),
        "bos": jsonable(model.input_encoder.bos),
        "pad": jsonable(model.input_encoder.pad),
        "max_seq_len": config.max_seq_len,
        "causal": config.causal,
        "output": _output_kind(model),
        "numerical_error_bound": model.numerical_error_bound,
        # The pre-norm of every sub-layer (None: no normalisation).
        "norm": None if config.norm is None else dataclasses.asdict(config.norm),
        "renamed": {
            label: data["name"]
            for label, data in sorted(model.graph.nodes(data=True) if model.graph is not None else ())
            if data.get("name", label) != label
        },
        # What the optimisation passes did (folded Maps keep their names here); unknown (empty)
        # for a model loaded from a file, which has no graph.
        "optimizations": list(applied(model.graph)) if model.graph is not None else [],
        # Each head a pass changed: the s-ops it writes and what was folded into it (empty
        # without a graph).
        "head_notes": head_notes(model),
    }


def _stored_name(config: ModelConfig, index: int) -> str:
    """A stored sub-layer's name: `layer L attn|mlp`, marked `(tied)` inside a loop's block."""
    kind = "attn" if isinstance(config.layers[index], AttentionSpec) else "mlp"
    tied = config.tied is not None and config.tied.start <= index < config.tied.stop
    return f"layer {index // 2} {kind}" + (" (tied)" if tied else "")


def format_value(value: Any) -> str:
    """A decoded value for printing: floats to 6 significant digits, `None` as `None`."""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def summary_text(summary: dict[str, Any]) -> str:
    lines = [
        f"layers: {summary['layers']} ({len(summary['sublayers'])} sub-layers), "
        f"residual width {summary['residual_width']}, heads per layer {summary['heads']}, "
        f"MLP widths {summary['mlp_hidden']}",
        f"parameters: {summary['parameters']['total']} stored, {summary['parameters']['nonzero']} non-zero",
        f"vocab: {' '.join(format_value(v) for v in summary['vocab'])}   max_seq_len: "
        f"{summary['max_seq_len']}   causal: {'yes' if summary['causal'] else 'no'}   "
        f"output: {summary['output']}",
        f"residual labels: {', '.join(summary['labels'])}",
    ]
    tied = summary.get("tied")
    if tied:
        first, last = tied["layers"]
        span = f"layer {first}" if first == last else f"layers {first}-{last}"
        lines.append(
            f"tied: {span} stored once, run {tied['repeats']} times with shared weights "
            f"(a compiled loop; {tied['executed_layers']} layers executed)"
        )
    norm = summary.get("norm")
    if norm:
        lines.append(
            f"norm: {norm['kind']} before every sub-layer and the unembedding, gain {norm['scale']:.6g}; "
            f"anchor {norm['anchor']:.6g} keeps each divisor within {norm['spread']:.1e} of the gain"
        )
    renamed = summary.get("renamed")
    if renamed:
        shown = ", ".join(f"{label} (your {name!r})" for label, name in renamed.items())
        lines.append(f"shared names made unique: {shown}")
    bound = summary.get("numerical_error_bound")
    if bound:
        lines.append(f"numerical Maps: worst relative error {bound:.2g} on their value sets")
    lines += [f"optimised: {line}" for line in summary.get("optimizations", ())]
    lines += [f"optimised head: {line}" for line in summary.get("head_notes", ())]
    return "\n".join(lines)


def _cell(value: float) -> str:
    return "." if value == 0 else f"{value:.4g}"


def residual_table(result: ApplyResult, tokens: Sequence[Hashable]) -> str:
    """Per snapshot (embedding, each sub-layer): the non-zero residual rows by position.

    Zeros print as `.`; a `*` marks the rows the sub-layer changed.
    """
    header_tokens = [format_value(t) for t in tokens]
    labels = result.residuals[0].labels
    label_width = max(len(label) for label in labels) + 2
    blocks = []
    previous = None
    for snapshot in result.residuals:
        values = snapshot.values.T  # [D, T]
        changed = (
            np.zeros(len(labels), bool) if previous is None else np.any(changed_entries(previous, values), axis=1)
        )
        cells = [[_cell(v) for v in row] for row in values]
        width = max([len(c) for row in cells for c in row] + [len(t) for t in header_tokens]) + 1
        shown = [i for i in range(len(labels)) if np.any(values[i] != 0)]
        lines = [f"== {snapshot.name} ({len(labels) - len(shown)} all-zero rows hidden)"]
        lines.append(" " * (label_width + 2) + "".join(t.rjust(width) for t in header_tokens))
        for i in shown:
            mark = "*" if changed[i] else " "
            lines.append(f"{mark} {labels[i].ljust(label_width)}" + "".join(c.rjust(width) for c in cells[i]))
        blocks.append("\n".join(lines))
        previous = values
    return "\n".join(blocks)
