"""Shared plumbing of the experiment scripts: arguments, output files, the paper-vs-ours table."""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax

from compiler.atomic import atomic_write_text
from compression.learned.config import OptimizerConfig

# The experiments run 10-30x fewer steps than the paper's 3e5, so they start the same linear decay
# (over the first half, to 1e-6) from a 10x larger rate; --paper-schedule restores appendix E.
EXPERIMENT_LR = 1e-2
PAPER_LR, PAPER_STEPS = 1e-3, 300_000


def optimizer_from_args(args: argparse.Namespace) -> OptimizerConfig:
    """AdamW settings of an experiment run (paper defaults except the initial rate)."""
    return OptimizerConfig(lr_init=PAPER_LR if args.paper_schedule else args.lr)


def steps_from_args(args: argparse.Namespace, default: int, quick: int) -> int:
    """Steps per run: --steps, else the paper's with --paper-schedule, else the script default."""
    if args.steps:
        return args.steps
    if args.paper_schedule:
        return PAPER_STEPS
    return quick if args.quick else default


def base_parser(name: str, description: str) -> argparse.ArgumentParser:
    """Options every experiment takes."""
    parser = argparse.ArgumentParser(prog=f"python -m compression.experiments.{name}", description=description)
    parser.add_argument("--out", type=Path, default=Path("out") / "compression" / name,
                        help="output folder for PNGs, JSON, CSV and checkpoints (default: %(default)s)")
    parser.add_argument("--quick", action="store_true",
                        help="a few hundred steps on few widths: checks the pipeline, not the paper's numbers")
    parser.add_argument("--steps", type=int, default=None, help="optimiser steps per run (overrides the default)")
    parser.add_argument("--batch-size", type=int, default=256, help="batch size (paper: 256)")
    parser.add_argument("--chunk-size", type=int, default=None, help="steps fused per jitted call")
    parser.add_argument("--seed", type=int, default=0, help="seed of W's init and of the data")
    parser.add_argument("--lr", type=float, default=EXPERIMENT_LR,
                        help="initial learning rate (default: %(default)s; the paper's 1e-3 needs ~10x more steps)")
    parser.add_argument("--paper-schedule", action="store_true",
                        help="the paper's exact setup: lr 1e-3 and 300000 steps per run (hours on a CPU)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    return parser


def _clean(value: Any) -> Any:
    """JSON-safe: numpy scalars to Python, NaN/inf to None."""
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "tolist"):
        return _clean(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json(path: Path, data: Mapping[str, Any]) -> Path:
    """Write ``data`` as indented JSON, atomically."""
    return atomic_write_text(path, json.dumps(_clean(data), indent=2, sort_keys=False) + "\n")


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write a list of flat dicts as CSV (columns from the first row), atomically."""
    import io

    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0].keys()))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _clean(v) for k, v in row.items()})
    return atomic_write_text(path, buffer.getvalue())


def read_csv(path: Path) -> list[dict[str, Any]]:
    """Rows written by :func:`write_csv`, as dicts of strings (empty cells, written for None, as None)."""
    with path.open(newline="") as handle:
        return [{k: (None if v == "" else v) for k, v in row.items()} for row in csv.DictReader(handle)]


def comparison_table(rows: Iterable[tuple[object, object, object]]) -> str:
    """A three-column text table: quantity, the paper's number, ours (each cell as ``str`` shows it)."""
    cells: list[tuple[str, ...]] = [("quantity", "paper", "ours")] + [tuple(map(str, r)) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(3)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def environment() -> dict[str, Any]:
    """Where the experiment ran (recorded in its JSON)."""
    devices = jax.local_devices()
    return {"backend": jax.default_backend(), "devices": [str(d) for d in devices], "device_count": len(devices),
            "jax": jax.__version__, "cpu_count": os.cpu_count()}
