"""Frozen configuration records for compression runs.

Every knob of a compression run lives in one of these dataclasses so a run is fully described by
plain data: it is written next to checkpoints as JSON and compared on resume.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from compiler.errors import CompressionError

CategoricalTarget = Literal["argmax", "distribution", "margin"]
LayerTarget = Literal["outputs", "residuals", "written"]
LayerReduction = Literal["sum", "mean"]
InitMethod = Literal["orthogonal", "gaussian", "identity"]
SamplingMode = Literal["auto", "random", "enumerate"]
ScheduleKind = Literal["linear", "warmup_cosine"]


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
    """AdamW and its learning-rate schedule.

    ``schedule="linear"`` (default, paper appendix E): ``lr_init`` decays linearly to ``lr_final``
    over ``decay_fraction`` of the steps, constant after. ``"warmup_cosine"``: rises linearly from
    0 to ``lr_init`` over ``warmup_fraction`` of the steps, then follows a cosine down to
    ``lr_final`` at the last step (``decay_fraction`` unused).
    """

    lr_init: float = 1e-3
    lr_final: float = 1e-6
    decay_fraction: float = 0.5  # fraction of all steps over which lr decays; constant after
    weight_decay: float = 0.1
    b1: float = 0.9
    b2: float = 0.99
    eps: float = 1e-8
    schedule: ScheduleKind = "linear"
    warmup_fraction: float = 0.05  # "warmup_cosine" only

    def __post_init__(self) -> None:
        if self.schedule not in ("linear", "warmup_cosine"):
            raise CompressionError(f"unknown schedule {self.schedule!r}; use 'linear' or 'warmup_cosine'")
        if not 0.0 <= self.warmup_fraction < 1.0:
            raise CompressionError(f"warmup_fraction must be in [0, 1), got {self.warmup_fraction}")


@dataclasses.dataclass(frozen=True)
class LossConfig:
    """Weights of the loss terms and how the output target is formed.

    The defaults are the paper's objective (section 5.1). :meth:`exact` is the objective that
    prefers exact models: every term is 0 for a W under which the compressed model reads every
    value right, whether or not ``W Wᵀ`` is the identity (see ``compression.learned.losses``).
    """

    out_weight: float = 1.0
    layer_weight: float = 1.0
    # "argmax"/"distribution": cross-entropy against the compiled argmax or softmax; "margin":
    # squared hinge on the logit gap (right logit minus the best wrong one) below ``margin`` times
    # the compiled model's gap
    categorical_target: CategoricalTarget = "argmax"
    # "outputs": what each sub-layer writes, read back through W (the paper's h_i); "residuals":
    # the whole stream after it; "written": what each sub-layer computes, before W writes it
    layer_target: LayerTarget = "outputs"
    layer_reduction: LayerReduction = "sum"  # over the D residual coordinates of one position
    include_embedding: bool = False  # also compare the embedding (the stream before any layer)
    margin: float = 0.5  # "margin" target: the fraction of the compiled logit gap to keep
    # KL divergence of the compressed attention patterns from the compiled ones (0: not computed)
    attention_weight: float = 0.0
    # squared hinge on each ReLU pre-activation that falls short of ``hidden_margin`` times its
    # compiled value on the compiled side of 0 (0: not computed; see losses.hidden_loss)
    hidden_weight: float = 0.0
    hidden_margin: float = 0.25
    # layer_target "written" only: on the model's one-hot coordinates (FrozenModel.one_hot) count only
    # deviations towards the other side, an off value above 0 or an on value below its compiled one;
    # an off value read negative or an on value read larger is what superposed codes give an exact
    # model, and thresholded readers keep reading them right (see losses.written_margin)
    written_margin: bool = False
    # weigh every position by 1 / (valid positions in the batch with its compiled output value),
    # so a rare output value counts as much as a common one (categorical outputs only)
    balance_outputs: bool = False

    def __post_init__(self) -> None:
        if not 0.0 < self.margin <= 1.0:
            raise CompressionError(f"margin must be in (0, 1], got {self.margin}")
        if not 0.0 <= self.hidden_margin <= 1.0:
            raise CompressionError(f"hidden_margin must be in [0, 1], got {self.hidden_margin}")
        if min(self.out_weight, self.layer_weight, self.attention_weight, self.hidden_weight) < 0:
            raise CompressionError("loss weights must be >= 0")

    @classmethod
    def exact(cls, balance_outputs: bool = False, written_margin: bool = True) -> LossConfig:
        """The exactness objective: logit-gap margins, the layers' own outputs (their one-hot
        coordinates one-sided, ``written_margin``; False compares every coordinate as it is),
        attention patterns and the signs of the ReLU pre-activations (``balance_outputs``: every
        compiled output value weighing the same per batch)."""
        return cls(categorical_target="margin", layer_target="written", attention_weight=1.0, hidden_weight=1.0,
                   balance_outputs=balance_outputs, written_margin=written_margin)


@dataclasses.dataclass(frozen=True)
class SamplingConfig:
    """How training inputs are drawn from the valid input space (see ``sampling.InputSpace``)."""

    mode: SamplingMode = "auto"
    enumerate_limit: int = 20_000  # "auto" enumerates when the space has at most this many inputs
    # draw from the enumerated pool with every length equally likely (as random sampling does),
    # instead of every sequence equally likely (which makes short inputs rare)
    balance_lengths: bool = True
    # share of every batch drawn from the replay inputs (``Compressor.set_replay``: e.g. the inputs
    # the last exactness check found wrong) while there are any; 0: never
    replay_fraction: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.replay_fraction < 1.0:
            raise CompressionError(f"replay_fraction must be in [0, 1), got {self.replay_fraction}")

    def replay_rows(self, batch_size: int) -> int:
        """Rows of a batch of ``batch_size`` drawn from the replay inputs when there are any."""
        return int(round(self.replay_fraction * batch_size))


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
    # The last ``fade_columns`` columns of W are multiplied by a factor falling linearly from 1 to 0
    # over the first ``fade_fraction`` of the steps, and are 0 after: a run at width d + k that
    # ends as a width-d W, leaving GD time to move what those columns carried (0: no fading).
    fade_columns: int = 0
    fade_fraction: float = 0.5
    # Columns W is held with while training (None: d). The ones beyond d are 0 and masked out of
    # the loss, so they stay 0 and the outputs are those of the [D, d] W; what it buys is one
    # compiled training step for every run of a model at any d <= width (a width scan compiles once).
    width: int | None = None

    def __post_init__(self) -> None:
        if self.d < 1:
            raise CompressionError(f"d must be >= 1, got {self.d}")
        if self.width is not None and self.width < self.d:
            raise CompressionError(f"width must be >= d = {self.d} (or None), got {self.width}")
        if self.steps < 1 or self.batch_size < 1 or self.chunk_size < 1:
            raise CompressionError("steps, batch_size and chunk_size must all be >= 1")
        if not 0 <= self.fade_columns < self.d:
            raise CompressionError(f"fade_columns must be in [0, d) = [0, {self.d}), got {self.fade_columns}")
        if not 0.0 < self.fade_fraction <= 1.0:
            raise CompressionError(f"fade_fraction must be in (0, 1], got {self.fade_fraction}")

    @property
    def held_width(self) -> int:
        """Columns of the W the trainer holds: ``width``, or d."""
        return self.width or self.d

    @property
    def fade_steps(self) -> int:
        """Steps after which the faded columns are 0."""
        return max(1, int(round(self.fade_fraction * self.steps))) if self.fade_columns else 0

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (JSON-serialisable)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Inverse of :meth:`to_dict`."""
        data = dict(data)
        data["optimizer"] = OptimizerConfig(**data.get("optimizer", {}))
        data["loss"] = LossConfig(**data.get("loss", {}))
        data["sampling"] = SamplingConfig(**data.get("sampling", {}))
        return cls(**data)


@dataclasses.dataclass(frozen=True)
class GDRecipe:
    """How a width search trains W at each width: one :class:`TrainConfig` per (d, seed).

    Each run is stopped at the first chunk boundary (every ``check_every`` steps) at which the
    compressed model is exact on the whole exactness set, so ``steps`` is a budget, not a length;
    the schedule still spans the whole budget. ``seeds`` runs are made per width (seeds
    ``seed .. seed + seeds - 1``); a width counts as reached when one of them is exact.
    """

    steps: int = 6_000
    batch_size: int = 256
    check_every: int = 250
    seeds: int = 2
    # train every width as a [D, D] W whose columns beyond d are held at 0 (TrainConfig.width):
    # one compiled training step per model for a whole width scan
    shared_width: bool = True
    # chosen by small measured runs (docs/compression.md, "A fair GD baseline")
    optimizer: OptimizerConfig = OptimizerConfig(lr_init=1e-2, weight_decay=0.1, schedule="warmup_cosine")
    # the exactness objective with every output value weighing the same: exact sooner or where
    # the paper's was not (docs/compression.md, "An objective that prefers exact models")
    loss: LossConfig = LossConfig.exact(balance_outputs=True)
    # a tenth of every batch from the inputs the last exactness check found wrong: the rare ones a
    # run otherwise ends on (docs/compression.md, "The last wrong inputs")
    sampling: SamplingConfig = SamplingConfig(replay_fraction=0.1)

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1 or self.check_every < 1 or self.seeds < 1:
            raise CompressionError("steps, batch_size, check_every and seeds must all be >= 1")

    def train_config(self, d: int, seed: int, residual_dim: int | None = None) -> TrainConfig:
        """The trainer's config for one run at width ``d`` with ``seed`` (held at ``residual_dim``
        columns when ``shared_width`` and it is given)."""
        return TrainConfig(d=d, steps=self.steps, batch_size=self.batch_size,
                           chunk_size=min(self.check_every, self.steps), seed=seed,
                           optimizer=self.optimizer, loss=self.loss, sampling=self.sampling,
                           width=residual_dim if self.shared_width else None)
