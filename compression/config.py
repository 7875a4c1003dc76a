"""Frozen configuration records for compression runs.

Every knob of a compression run lives in one of these dataclasses so a run is fully described by
plain data: it is written next to checkpoints as JSON and compared on resume.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

CategoricalTarget = Literal["argmax", "distribution"]
LayerTarget = Literal["outputs", "residuals"]
LayerReduction = Literal["sum", "mean"]
InitMethod = Literal["orthogonal", "gaussian", "identity"]
SamplingMode = Literal["auto", "random", "enumerate"]


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
    """AdamW with a linear learning-rate decay followed by a constant tail (paper, appendix E)."""

    lr_init: float = 1e-3
    lr_final: float = 1e-6
    decay_fraction: float = 0.5  # fraction of all steps over which lr decays; constant after
    weight_decay: float = 0.1
    b1: float = 0.9
    b2: float = 0.99
    eps: float = 1e-8


@dataclasses.dataclass(frozen=True)
class LossConfig:
    """Weights of the two loss terms and how the output target is formed."""

    out_weight: float = 1.0
    layer_weight: float = 1.0
    categorical_target: CategoricalTarget = "argmax"
    # "outputs": what each sub-layer writes (the paper's h_i); "residuals": the whole stream after it
    layer_target: LayerTarget = "outputs"
    layer_reduction: LayerReduction = "sum"  # over the D residual coordinates of one position
    include_embedding: bool = False  # also compare the embedding (the stream before any layer)


@dataclasses.dataclass(frozen=True)
class SamplingConfig:
    """How training inputs are drawn from the valid input space (see ``sampling.InputSpace``)."""

    mode: SamplingMode = "auto"
    enumerate_limit: int = 20_000  # "auto" enumerates when the space has at most this many inputs
    # draw from the enumerated pool with every length equally likely (as random sampling does),
    # instead of every sequence equally likely (which makes short inputs rare)
    balance_lengths: bool = True


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """One compression run: target width, length, batch, seed, and its sub-configs."""

    d: int
    steps: int = 20_000
    batch_size: int = 256
    chunk_size: int = 500  # optimiser steps fused into one jitted lax.scan call
    seed: int = 0
    init: InitMethod = "orthogonal"
    init_scale: float = 1.0
    optimizer: OptimizerConfig = OptimizerConfig()
    loss: LossConfig = LossConfig()
    sampling: SamplingConfig = SamplingConfig()

    def __post_init__(self) -> None:
        if self.d < 1:
            raise ValueError(f"d must be >= 1, got {self.d}")
        if self.steps < 1 or self.batch_size < 1 or self.chunk_size < 1:
            raise ValueError("steps, batch_size and chunk_size must all be >= 1")

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (JSON-serialisable)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainConfig":
        """Inverse of :meth:`to_dict`."""
        data = dict(data)
        data["optimizer"] = OptimizerConfig(**data.get("optimizer", {}))
        data["loss"] = LossConfig(**data.get("loss", {}))
        data["sampling"] = SamplingConfig(**data.get("sampling", {}))
        return cls(**data)
