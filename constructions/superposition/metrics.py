"""Accuracy metrics (docs/superposition.md, 'How errors are measured'), shared by every measurement function.

Errors are signed ``y - t``; ``acc@0.5`` counts ``(y > 0.5) == (t == 1)``. Results are split by
the status of each gate's own inputs (how many of them are on), because the constructions' error laws are
stated per status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ErrorStats:
    """Summary of ``y - t`` over one set of readings."""

    count: int
    max_abs: float
    mean_abs: float
    rms: float
    mean_signed: float
    min_signed: float
    accuracy: float  # acc@0.5

    def __str__(self) -> str:
        return (f"n={self.count} max={self.max_abs:.4f} mean={self.mean_abs:.4f} "
                f"rms={self.rms:.4f} acc={self.accuracy:.5f}")


def error_stats(y: np.ndarray, t: np.ndarray) -> ErrorStats:
    """Error summary of readings ``y`` against 0/1 (or integer count) targets ``t``."""
    y = np.asarray(y).ravel()
    t = np.asarray(t, dtype=y.dtype if y.dtype.kind == "f" else np.float64).ravel()
    if y.shape != t.shape:
        raise ValueError(f"readings {y.shape} and targets {t.shape} differ in size")
    if y.size == 0:
        nan = float("nan")
        return ErrorStats(0, nan, nan, nan, nan, nan, nan)
    err = y - t
    return ErrorStats(
        count=int(y.size),
        max_abs=float(np.abs(err).max()),
        mean_abs=float(np.abs(err).mean(dtype=np.float64)),
        rms=float(np.sqrt(np.mean(np.square(err), dtype=np.float64))),
        mean_signed=float(err.mean(dtype=np.float64)),
        min_signed=float(err.min()),
        accuracy=float(np.mean((y > 0.5) == (t >= 0.5))),
    )


@dataclass(frozen=True)
class StatusReport:
    """Error statistics per gate-input status plus over all readings."""

    by_status: Mapping[object, ErrorStats]
    overall: ErrorStats

    def __getitem__(self, status: object) -> ErrorStats:
        return self.by_status[status]

    def __str__(self) -> str:
        lines = [f"overall: {self.overall}"]
        lines += [f"{k}: {v}" for k, v in self.by_status.items()]
        return "\n".join(lines)


def split_by_status(y: np.ndarray, t: np.ndarray, status: np.ndarray,
                    names: Mapping[Any, object] | None = None) -> StatusReport:
    """Group readings by ``status`` (same shape as ``y``) and summarise each group.

    ``names`` optionally maps raw status values to display keys (e.g. ``{2: "both"}``); raw values
    missing from ``names`` keep their value as key.
    """
    y = np.asarray(y)
    t = np.asarray(t)
    status = np.asarray(status)
    groups: dict[object, ErrorStats] = {}
    if status.dtype.kind in "iu" and status.size and status.min() >= 0:
        values = np.flatnonzero(np.bincount(status.ravel()))
    else:
        values = np.unique(status)
    for raw in values:
        value = np.asarray(raw)
        mask = status == value
        key = names.get(value.item(), value.item()) if names else value.item()
        groups[key] = error_stats(y[mask], t[mask])
    return StatusReport(MappingProxyType(groups), error_stats(y, t))


def balanced_accuracy(y_present: np.ndarray, y_absent: np.ndarray) -> float:
    """Mean of acc@0.5 on present (target 1) and absent (target 0) readings."""
    acc_present = float(np.mean(np.asarray(y_present) > 0.5))
    acc_absent = float(np.mean(np.asarray(y_absent) <= 0.5))
    return 0.5 * (acc_present + acc_absent)
