"""Compressing ``sort_unique`` (Tracr paper, Figure 8).

The compressed model reaches near-perfect accuracy while the mean cosine similarity between its
layer outputs and the compiled model's stays well below 1 (paper: about 0.8); the per-variable
breakdown locates the discrepancy (paper: in ``target_pos``, which the compressed model seems to
encode numerically instead of one-hot).

Writes ``sort_unique_training.png`` (accuracy and per-layer cosine over training, Fig. 8 right),
``sort_unique_layer_outputs.png`` (mean layer outputs, compiled / compressed / squared
difference, Fig. 8 left), ``sort_unique_wtw.png``, ``sort_unique_curve.csv``,
``sort_unique_variables.csv`` and ``sort_unique_summary.json`` into ``--out``.

Usage: ``python -m compression.experiments.sort_unique [--quick] [--out DIR] [--d D] [--steps N]``
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from compression import plots
from compression.analysis import layer_cosine_similarity, mean_layer_outputs, residual_pair, variable_breakdown
from compression.evaluation import ReferenceSet, accuracy
from compression.experiments.common import (
    base_parser,
    comparison_table,
    environment,
    optimizer_from_args,
    steps_from_args,
    write_csv,
    write_json,
)
from compression.experiments.runs import train_and_measure
from compression.learned.config import TrainConfig
from compression.learned.projection import gram
from compression.learned.sampling import enumerate_inputs
from compression.task import CompressionTask, sort_unique_task

PAPER = {
    "accuracy": "close to 100%",
    "layer_cosine": "about 0.8",
    "discrepancy_in": "target_pos",
    "d": "not stated in the paper",
    "steps": 300_000,
    "batch_size": 256,
}
DEFAULT_D, DEFAULT_STEPS, QUICK_STEPS = 12, 30_000, 300


def curve_recorder(task: CompressionTask, ids: np.ndarray, refs: ReferenceSet,
                   curve: list[dict]) -> Callable[[Any, dict[str, np.ndarray]], bool]:
    """A chunk callback appending loss, accuracy and per-layer cosine to ``curve`` (never stops)."""

    def record(state: Any, history: dict[str, np.ndarray]) -> bool:
        w = np.asarray(state.projection)
        outputs = residual_pair(task.model, w, ids).layer_outputs()
        cos = layer_cosine_similarity(outputs)
        curve.append({"step": len(history["total"]), "loss": float(history["total"][-1]),
                      "accuracy": accuracy(task.model, w, refs).position,
                      **{f"cos_{n}": float(c) for n, c in zip(outputs.names, cos)}})
        return False

    return record


def error_by_variable(breakdown: list[dict]) -> dict[str, float]:
    """Squared error of the layer outputs summed per residual variable."""
    by_variable: dict[str, float] = {}
    for row in breakdown:
        by_variable[row["variable"]] = by_variable.get(row["variable"], 0.0) + row["sq_error"]
    return by_variable


def write_figures(out: Path, curve: list[dict], outputs: Any, projection: np.ndarray,
                  labels: Sequence[str], d: int) -> list[Path]:
    """Training curve (if any chunk was recorded), mean layer outputs and W Wᵀ as PNG files."""
    files = []
    if curve:
        names = [n for n in outputs.names if any(np.isfinite(c[f"cos_{n}"]) for c in curve)]  # skip empty layers
        files.append(plots.plot_training_metrics(
            [c["step"] for c in curve], [c["accuracy"] for c in curve],
            np.asarray([[c[f"cos_{n}"] for n in names] for c in curve]), names, out / "sort_unique_training.png"))
    compiled_mean, compressed_mean, sq = mean_layer_outputs(outputs)
    return files + [
        plots.plot_layer_outputs(compiled_mean, compressed_mean, sq, labels, outputs.names,
                                 out / "sort_unique_layer_outputs.png"),
        plots.plot_gram(gram(projection), labels, out / "sort_unique_wtw.png",
                        f"sort_unique, learned W, d={d}: W Wᵀ"),
    ]


def print_comparison(summary: dict, active: Sequence[str], wall_time_s: float) -> None:
    """The paper's numbers beside ours."""
    ours = summary["ours"]
    worst = ours["largest_discrepancy"]
    print()
    print(comparison_table([
        ("residual width D / compressed d", f"? / {PAPER['d']}", f"{ours['residual_dim']} / {ours['d']}"),
        ("accuracy vs RASP", PAPER["accuracy"], f"{ours['run']['position_accuracy']:.4f} (compiled "
                                                f"{ours['compiled_accuracy']:.4f})"),
        ("cosine of layer outputs", PAPER["layer_cosine"],
         ", ".join(f"{n}={ours['layer_cosine'][n]:.2f}" for n in active)),
        ("variable with the largest error", PAPER["discrepancy_in"],
         f"{worst} ({100 * ours['largest_discrepancy_share']:.0f}% of squared error)"),
        ("steps x batch", f"{PAPER['steps']} x {PAPER['batch_size']}", f"{ours['steps']} x {ours['batch_size']}"),
        ("time", "1-4 h on two CPU cores", f"{wall_time_s:.0f} s"),
    ]))


def main(argv: Sequence[str] | None = None) -> dict:
    parser = base_parser("sort_unique", __doc__.split("\n")[0])
    parser.add_argument("--d", type=int, default=DEFAULT_D, help="compressed width (default: %(default)s)")
    parser.add_argument("--vocab-size", type=int, default=5, help="tokens 1..N (default: %(default)s)")
    parser.add_argument("--max-seq-len", type=int, default=5, help="default: %(default)s")
    args = parser.parse_args(argv)
    task = sort_unique_task(args.vocab_size, args.max_seq_len)
    labels = task.model.residual_labels
    steps = steps_from_args(args, DEFAULT_STEPS, QUICK_STEPS)
    chunk = args.chunk_size or min(1000 if not args.quick else 100, steps)
    out: Path = args.out

    ids = enumerate_inputs(task.space)
    refs = task.reference_set(ids)
    compiled_accuracy = accuracy(task.model, None, refs)
    curve: list[dict] = []
    config = TrainConfig(d=args.d, steps=steps, batch_size=args.batch_size, chunk_size=chunk, seed=args.seed,
                         optimizer=optimizer_from_args(args))
    result, summary = train_and_measure(task, config, refs, 0.5, out / "checkpoints" / f"d{args.d}",
                                        progress=not args.no_progress,
                                        on_chunk=curve_recorder(task, ids, refs, curve))
    outputs = residual_pair(task.model, result.projection, ids).layer_outputs()
    cosine = layer_cosine_similarity(outputs)
    active = [n for n, c in zip(outputs.names, cosine) if np.isfinite(c)]
    breakdown = variable_breakdown(outputs, labels)
    by_variable = error_by_variable(breakdown)
    worst = max(by_variable, key=by_variable.__getitem__)

    files = write_figures(out, curve, outputs, result.projection, labels, args.d)
    files += [write_csv(out / "sort_unique_curve.csv", curve), write_csv(out / "sort_unique_variables.csv", breakdown)]
    summary_json = {
        "paper": PAPER,
        "ours": {
            "d": args.d, "residual_dim": task.model.residual_dim, "residual_labels": list(labels), "steps": steps,
            "batch_size": args.batch_size, "lr_init": optimizer_from_args(args).lr_init, "quick": args.quick,
            "run": summary.row(),
            "compiled_accuracy": compiled_accuracy.position,
            "layer_cosine": {n: float(c) for n, c in zip(outputs.names, cosine)},
            "mean_cosine_over_active_layers": float(np.nanmean(cosine)),
            "squared_error_by_variable": by_variable, "largest_discrepancy": worst,
            "largest_discrepancy_share": by_variable[worst] / (sum(by_variable.values()) or 1.0),
        },
        "environment": environment(),
    }
    files.append(write_json(out / "sort_unique_summary.json", summary_json))
    print_comparison(summary_json, active, summary.wall_time_s)
    print(f"\nwrote {len(files)} files to {out}")
    return summary_json


if __name__ == "__main__":
    main(sys.argv[1:])
