"""Train SAELens sparse autoencoders directly on activation shards, and score them here.

SAELens (PyPI ``sae-lens``) pins ``transformer-lens<4``, which conflicts with the project's
``export`` extra (``transformer-lens>=4.3``), so it lives in its own environment: the ``sae`` extra
(``pip install -e '.[sae]'`` in a venv without ``export``). This module imports ``torch`` and
``sae_lens`` only inside its functions, so it imports everywhere; calling it without SAELens
raises an ImportError saying how to install it.

* :func:`train_sae` builds an SAELens training SAE (BatchTopK or TopK) of ``d_sae`` latents on a
  shard folder's width and runs SAELens' own ``SAETrainer`` on batches read from the shards.
  Pass a list as ``history`` to receive the loss curve (:class:`LossPoint` every ``log_every``
  steps), so a run can show it has converged.
* :class:`TorchCoder` wraps any SAELens SAE as a :class:`compiler.lab.features.metrics.SparseCoder`,
  so the metrics, splicing and causal use of this package score it.
"""

from __future__ import annotations

import dataclasses
import itertools
import pathlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from compiler.errors import LabError
from compiler.lab.features.stream import ShardReader

ARCHITECTURES = ("topk", "batchtopk")


@dataclasses.dataclass(frozen=True)
class LossPoint:
    """The training loss at one optimizer step: the total, SAELens' named parts (e.g. ``mse_loss``),
    and the learning rate that step used."""

    step: int
    loss: float
    parts: dict[str, float]
    lr: float


INSTALL = ("SAELens is not installed in this environment. It needs transformer-lens<4, which conflicts with "
           "the 'export' extra: make a separate venv and `pip install -e '.[sae]'` there (see docs/features.md)")


def _import():
    try:
        import sae_lens
        import torch
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(INSTALL) from error
    return sae_lens, torch


def shard_batches(folder: str | pathlib.Path, batch_size: int, device: str = "cpu", seed: int = 0) -> Iterator[Any]:
    """Endless ``[batch_size, d]`` torch batches of a shard folder's activations; each pass over the
    shards visits them in a new seeded order, rows shuffled within each batch window."""
    _, torch = _import()
    reader = ShardReader(pathlib.Path(folder))
    _check_one_batch(reader, batch_size)
    rng = np.random.default_rng(seed)
    for _ in itertools.count():
        names = [reader.meta["shards"][i] for i in rng.permutation(len(reader.meta["shards"]))]
        for batch in _batches_of(reader, names, batch_size):
            yield torch.from_numpy(batch[rng.permutation(len(batch))]).to(device)


def _check_one_batch(reader: ShardReader, batch_size: int) -> None:
    """Refuse a folder holding fewer activations than one batch: no batch would ever fill, and
    the endless batch loop would spin without yielding."""
    if reader.meta["tokens"] < batch_size:
        raise LabError(f"{reader.folder} holds {reader.meta['tokens']} activations, fewer than one batch of {batch_size}; "
                       "stream more tokens or train with a smaller batch_size")


def _batches_of(reader: ShardReader, names: list[str], batch_size: int) -> Iterator[np.ndarray]:
    from safetensors.numpy import load_file

    rest = np.zeros((0, reader.meta["width"]), np.float32)
    for name in names:
        data = np.concatenate([rest, load_file(pathlib.Path(reader.folder) / name)["activations"]])
        full = len(data) - len(data) % batch_size
        for start in range(0, full, batch_size):
            yield data[start:start + batch_size]
        rest = data[full:]


def train_sae(folder: str | pathlib.Path, d_sae: int, k: int, steps: int, batch_size: int = 1024, lr: float = 3e-4,
              architecture: str = "topk", device: str = "cpu", seed: int = 0, history: list[LossPoint] | None = None,
              log_every: int = 50, warmup_steps: int = 0, decay_steps: int = 0) -> Any:
    """Train an SAELens SAE on the activations in ``folder`` (written by ``stream_activations``).

    Args:
        folder: a finished shard folder.
        d_sae: number of latents.
        k: active latents per activation (TopK) or on average over a batch (BatchTopK).
        steps: optimizer steps; ``steps * batch_size`` activations are read (shards cycle).
        batch_size, lr: SAELens' ``train_batch_size_samples`` and learning rate.
        architecture: ``"topk"`` (k per activation) or ``"batchtopk"`` (k on average over a batch:
            a top-k over the whole batch, slow on CPU).
        device: torch device.
        seed: torch seed (SAE initialisation) and shard order.
        history: if given, a :class:`LossPoint` is appended every ``log_every`` steps and at the last.
        log_every: steps between recorded losses.
        warmup_steps: steps of SAELens' linear warm-up from ``lr / warmup_steps`` to ``lr``.
        decay_steps: final steps of SAELens' linear decay from ``lr`` to 0 (0: ``lr`` stays
            constant to the end). The rate is constant in between.

    Returns:
        The trained SAELens ``TrainingSAE`` (in eval mode).

    Raises:
        ImportError: SAELens is not installed (the message says how).
        LabError: unknown architecture, non-positive sizes, a schedule longer than ``steps``, or
            fewer activations in ``folder`` than one batch.
        FileNotFoundError: ``folder`` has no ``meta.json`` (not a finished shard folder).
    """
    if architecture not in ARCHITECTURES:
        raise LabError(f"architecture {architecture!r}: use one of {ARCHITECTURES}")
    for name, value in (("d_sae", d_sae), ("k", k), ("steps", steps), ("batch_size", batch_size),
                        ("log_every", log_every)):
        if int(value) < 1:
            raise LabError(f"train_sae: {name} must be positive, got {value}")
    if warmup_steps < 0 or decay_steps < 0 or warmup_steps + decay_steps > steps:
        raise LabError(f"train_sae: warmup_steps ({warmup_steps}) and decay_steps ({decay_steps}) must be >= 0 "
                         f"and fit in steps ({steps})")
    reader = ShardReader(pathlib.Path(folder))
    _check_one_batch(reader, batch_size)
    sae_lens, torch = _import()
    from sae_lens.config import LoggingConfig, SAETrainerConfig
    from sae_lens.training.sae_trainer import SAETrainer

    torch.manual_seed(seed)
    width = int(reader.meta["width"])
    if architecture == "batchtopk":
        sae = sae_lens.BatchTopKTrainingSAE(sae_lens.BatchTopKTrainingSAEConfig(d_in=width, d_sae=d_sae, k=k,
                                                                                device=device))
    else:
        sae = sae_lens.TopKTrainingSAE(sae_lens.TopKTrainingSAEConfig(d_in=width, d_sae=d_sae, k=k, device=device))
    config = SAETrainerConfig(
        total_training_samples=steps * batch_size, train_batch_size_samples=batch_size, lr=lr, lr_end=lr,
        lr_scheduler_name="constant", lr_warm_up_steps=warmup_steps, lr_decay_steps=decay_steps,
        device=device, n_checkpoints=0, checkpoint_path=None, save_final_checkpoint=False,
        logger=LoggingConfig(log_to_wandb=False, eval_every_n_wandb_logs=2**31 - 1),
        dead_feature_window=1000, feature_sampling_window=2000, n_batches_for_norm_estimate=10)
    trainer = _recording_trainer(SAETrainer, history, log_every, steps)(cfg=config, sae=sae, data_provider=shard_batches(folder, batch_size, device, seed),
                         save_checkpoint_fn=lambda path: None)
    trainer.fit()
    sae.eval()
    return sae


def _recording_trainer(base: type, history: list[LossPoint] | None, every: int, steps: int) -> type:
    """``base`` (SAELens' ``SAETrainer``) whose ``step`` also appends the loss to ``history``."""
    if history is None:
        return base

    class Recording(base):
        def step(self, batch):
            lr = float(self.optimizer.param_groups[0]["lr"])
            output = super().step(batch)
            done = self.n_training_steps + 1
            if done % every == 0 or done == steps:
                history.append(LossPoint(done, float(output.loss.item()),
                                         {name: float(value.item()) if hasattr(value, "item") else float(value)
                                          for name, value in output.losses.items()}, lr))
            return output

    return Recording


@dataclasses.dataclass(frozen=True, eq=False)
class TorchCoder:
    """An SAELens SAE seen as a :class:`~compiler.lab.features.metrics.SparseCoder` (numpy in and out)."""

    sae: Any
    batch_size: int = 8192

    @property
    def decoder(self) -> np.ndarray:
        return self.sae.W_dec.detach().cpu().numpy()

    def encode(self, x: np.ndarray) -> np.ndarray:
        _, torch = _import()
        device = self.sae.W_dec.device
        with torch.no_grad():
            parts = [self.sae.encode(torch.from_numpy(np.ascontiguousarray(x[s:s + self.batch_size], np.float32))
                                     .to(device)).cpu().numpy() for s in range(0, len(x), self.batch_size)]
        return np.concatenate(parts) if parts else np.zeros((0, self.sae.cfg.d_sae), np.float32)

    def decode(self, z: np.ndarray) -> np.ndarray:
        _, torch = _import()
        device = self.sae.W_dec.device
        with torch.no_grad():
            parts = [self.sae.decode(torch.from_numpy(np.ascontiguousarray(z[s:s + self.batch_size], np.float32))
                                     .to(device)).cpu().numpy() for s in range(0, len(z), self.batch_size)]
        return np.concatenate(parts) if parts else np.zeros((0, self.sae.cfg.d_in), np.float32)
