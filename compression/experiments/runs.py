"""One compression run as the experiments use it: train (resumably), then measure."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from compression.evaluation import Accuracy, ReferenceSet, accuracy
from compression.learned.config import LossConfig, TrainConfig
from compression.learned.frozen import FrozenModel
from compression.learned.losses import compression_loss
from compression.learned.projection import pad_columns
from compression.learned.train import ChunkCallback, Compressor, TrainResult
from compression.task import CompressionTask


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """Final numbers of one run."""

    d: int
    steps: int
    final_out: float  # mean L_out over the last 1% of steps (at least one step)
    final_layer: float
    final_total: float
    eval_out: float  # L_out on the whole evaluation set
    eval_layer: float
    accuracy: Accuracy
    wall_time_s: float

    def row(self) -> dict[str, Any]:
        """Flat dict for CSV/JSON."""
        return {"d": self.d, "steps": self.steps, "final_out": self.final_out, "final_layer": self.final_layer,
                "final_total": self.final_total, "eval_out": self.eval_out, "eval_layer": self.eval_layer,
                "position_accuracy": self.accuracy.position, "sequence_accuracy": self.accuracy.sequence,
                "wall_time_s": self.wall_time_s}


def evaluation_loss(
    model: FrozenModel, projection: np.ndarray, ids: np.ndarray, config: LossConfig
) -> dict[str, float]:
    """L_out, L_layer and their weighted sum for ``projection`` on all of ``ids`` (one jitted
    program per model and loss, shared by every width through
    :func:`~compression.learned.projection.pad_columns`)."""
    key = (model.forward, config)
    if key not in _LOSS_CACHE:
        def loss(w: jax.Array, params: Any, ids: jax.Array) -> dict[str, jax.Array]:
            return compression_loss(w, dataclasses.replace(model, params=params), ids, config)[1]

        _LOSS_CACHE[key] = jax.jit(loss)
    parts = _LOSS_CACHE[key](pad_columns(projection, model.residual_dim), model.params, jnp.asarray(ids))
    return {k: float(v) for k, v in parts.items()}


_LOSS_CACHE: dict[tuple[Any, LossConfig], Any] = {}


def train_and_measure(
    task: CompressionTask, config: TrainConfig, refs: ReferenceSet, atol: float,
    checkpoint_dir: Path | None = None, progress: bool = True, on_chunk: ChunkCallback | None = None,
) -> tuple[TrainResult, RunSummary]:
    """Train W for ``task`` with ``config`` and measure losses and accuracy against RASP."""
    result = Compressor(task.model, task.space, config).train(checkpoint_dir=checkpoint_dir, progress=progress,
                                                              on_chunk=on_chunk)
    tail = max(1, len(result.history["total"]) // 100)
    final = {k: float(np.mean(v[-tail:])) for k, v in result.history.items()}
    losses = evaluation_loss(task.model, result.projection, refs.ids, config.loss)
    summary = RunSummary(config.d, result.steps_done, final["out"], final["layer"], final["total"],
                         losses["out"], losses["layer"], accuracy(task.model, result.projection, refs, atol),
                         result.wall_time_s)
    return result, summary


