"""Training W: a jitted ``lax.scan`` over chunks of AdamW steps, data-parallel, resumable.

The data of step ``s`` is drawn from ``fold_in(key(seed), s)``, and the state after a chunk
depends only on the state before it, so a run interrupted at a checkpoint and resumed produces
bit-for-bit the same W as an uninterrupted run on the same devices. The jitted chunk is a module
level function keyed on a hashable :class:`StepSpec`, so runs that differ only in their seed (or
are resumed in the same process) reuse one compilation.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from compiler.errors import CompressionError
from compression.learned import checkpoint as ckpt
from compression.learned.config import LossConfig, OptimizerConfig, TrainConfig
from compression.learned.frozen import FrozenModel
from compression.learned.losses import compression_loss
from compression.learned.optim import make_optimizer
from compression.learned.projection import init_projection, pad_columns
from compression.learned.sampling import InputSpace, draw_batch, training_pool
from compression.learned.sharding import DataParallel, data_parallel

METRICS = ("out", "layer", "total")
_INIT_STREAM, _DATA_STREAM = 0, 1
_REPLAY_STREAM = 1  # folded into a step's data key


class TrainState(NamedTuple):
    """Everything that changes during training."""

    projection: jax.Array
    opt_state: Any
    step: jax.Array  # int32 scalar: optimiser steps taken


@dataclasses.dataclass(frozen=True)
class StepSpec:
    """The static (hashable) description of one training step; the jit cache key."""

    model: FrozenModel  # hashed by identity: params are passed to the step as an argument
    space: InputSpace
    loss: LossConfig
    optimizer: OptimizerConfig
    total_steps: int
    batch_size: int
    parallel: DataParallel
    # whether W's columns are scaled at all (fading or padding, see TrainConfig.fade_columns and
    # .width); which columns and how fast is runtime data (Columns), so runs differing in it share
    # one compilation
    scaled: bool = False
    # rows of every batch drawn from the replay inputs while there are any (Replay: runtime data)
    replay_rows: int = 0

    def _key(self) -> tuple:
        return (self.space, self.loss, self.optimizer, self.total_steps, self.batch_size, self.parallel, self.scaled,
                self.replay_rows)

    def __hash__(self) -> int:
        return hash((id(self.model), self._key()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StepSpec) and self.model is other.model and self._key() == other._key()


class Columns(NamedTuple):
    """Per column of the W the trainer holds, what the loss multiplies it by (runtime data)."""

    keep: jax.Array  # [width] 1 for the run's d columns, 0 for the padding beyond them
    fading: jax.Array  # [width] 1 for the columns that fade out, 0 elsewhere
    fade_steps: jax.Array  # float32 scalar: steps over which they fade (>= 1)

    @classmethod
    def of(cls, d: int, fade: tuple[int, int], width: int | None = None) -> Columns:
        """``d`` columns, the last ``fade[0]`` fading over ``fade[1]`` steps, padded to ``width``."""
        columns, steps = fade
        index = np.arange(width or d)
        return cls(jnp.asarray(index < d, jnp.float32), jnp.asarray((index >= d - columns) & (index < d), jnp.float32),
                   jnp.asarray(max(steps, 1), jnp.float32))

    def scale(self, step: jax.Array | int) -> jax.Array:
        """The factors at ``step``: 0 on the padding, ``max(0, 1 - step / fade_steps)`` on the
        fading columns, 1 elsewhere."""
        progress = jnp.clip(jnp.asarray(step, jnp.float32) / self.fade_steps, 0.0, 1.0)
        return self.keep * (1.0 - self.fading * progress)


class Replay(NamedTuple):
    """Inputs to show the trainer more often (runtime data, fixed capacity): the first ``count``
    rows of ``ids``; ``SamplingConfig.replay_fraction`` of every batch is drawn from them."""

    ids: jax.Array  # [capacity, width] int32
    filled: jax.Array  # int32 scalar: valid rows (0: none, the batch is drawn as usual)

    @classmethod
    def of(cls, ids: np.ndarray, capacity: int, width: int, seed: int = 0) -> Replay:
        """At most ``capacity`` rows of ``ids`` (a seeded choice when there are more), padded."""
        ids = np.asarray(ids, np.int32).reshape(-1, width)
        if len(ids) > capacity:
            ids = ids[np.sort(np.random.default_rng(seed).choice(len(ids), capacity, replace=False))]
        held = np.zeros((max(capacity, 1), width), np.int32)
        held[:len(ids)] = ids
        return cls(jnp.asarray(held), jnp.asarray(len(ids), jnp.int32))

    def mix(self, key: jax.Array, ids: jax.Array, rows: int) -> jax.Array:
        """``ids`` with its first ``rows`` rows replaced by replay rows drawn uniformly (with
        replacement), or unchanged while there are none."""
        if not rows:
            return ids
        drawn = self.ids[jax.random.randint(key, (rows,), 0, jnp.maximum(self.filled, 1))]
        return ids.at[:rows].set(jnp.where(self.filled > 0, drawn, ids[:rows]))


def column_scale(d: int, fade: tuple[int, int], step: jax.Array | int, width: int | None = None) -> jax.Array:
    """Per column of W, the factor applied at ``step``: 1, for the last ``fade[0]`` of the ``d``
    columns ``max(0, 1 - step / fade[1])``, and 0 for the columns beyond d up to ``width``."""
    return Columns.of(d, fade, width).scale(step)


def _step(spec: StepSpec, params: Any, data_key: jax.Array, pool: tuple[jax.Array, jax.Array] | None,
          columns: Columns, replay: Replay, state: TrainState, _: Any) -> tuple[TrainState, jax.Array]:
    pool_ids, pool_probs = pool if pool is not None else (None, None)
    step_key = jax.random.fold_in(data_key, state.step)
    ids = draw_batch(step_key, spec.space, spec.batch_size, pool_ids, pool_probs)
    ids = replay.mix(jax.random.fold_in(step_key, _REPLAY_STREAM), ids, spec.replay_rows)
    ids = jax.lax.with_sharding_constraint(ids, spec.parallel.batch)
    model = dataclasses.replace(spec.model, params=params)
    if spec.scaled:  # static: runs without fading or padding trace no scaling at all
        scale = columns.scale(state.step)

        def loss(w: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
            return compression_loss(w * scale, model, ids, spec.loss)
    else:
        loss = functools.partial(compression_loss, model=model, ids=ids, config=spec.loss)
    (_, parts), grads = jax.value_and_grad(loss, has_aux=True)(state.projection)
    optimizer = make_optimizer(spec.optimizer, spec.total_steps)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.projection)
    metrics = jnp.stack([parts[name] for name in METRICS])
    return TrainState(optax.apply_updates(state.projection, updates), opt_state, state.step + 1), metrics


@functools.partial(jax.jit, static_argnames=("spec", "length"), donate_argnums=0)
def _run_chunk(state: TrainState, params: Any, data_key: jax.Array, pool: tuple[jax.Array, jax.Array] | None,
               columns: Columns, replay: Replay, *, spec: StepSpec, length: int) -> tuple[TrainState, jax.Array]:
    step = functools.partial(_step, spec, params, data_key, pool, columns, replay)
    state, metrics = jax.lax.scan(step, state, None, length=length)
    return jax.lax.with_sharding_constraint(state, spec.parallel.replicated), metrics


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """Outcome of :meth:`Compressor.train`."""

    projection: np.ndarray  # [D, d], as the model uses it (faded columns scaled, see TrainConfig.fade_columns)
    history: dict[str, np.ndarray]  # per-step "out", "layer", "total" losses from step 0
    steps_done: int
    wall_time_s: float  # time spent in this call (compilation included)
    finished: bool  # all configured steps done


ChunkCallback = Callable[["TrainState", dict[str, np.ndarray]], bool]


class Compressor:
    """Trains the projection of one frozen model on one input space with one config."""

    def __init__(
        self, model: FrozenModel, space: InputSpace, config: TrainConfig, parallel: DataParallel | None = None,
        initial_projection: np.ndarray | None = None,
    ) -> None:
        """``initial_projection``: start from this ``[D, d]`` W (e.g. an analytic one) instead of
        ``config.init``; a checkpoint, when resumed, still takes precedence."""
        self.model, self.space, self.config = model, space, config
        expected = (model.residual_dim, config.d)
        if initial_projection is not None and np.shape(initial_projection) != expected:
            raise CompressionError(f"initial_projection has shape {np.shape(initial_projection)}, expected {expected} "
                             "(residual_dim, config.d)")
        if config.held_width > model.residual_dim:
            raise CompressionError(f"config.width={config.held_width} exceeds the residual width {model.residual_dim}")
        self._initial = None if initial_projection is None else np.asarray(initial_projection, np.float32)
        self.parallel = parallel or data_parallel()
        self.parallel.check_batch(config.batch_size)
        self.optimizer = make_optimizer(config.optimizer, config.steps)
        scaled = bool(config.fade_columns) or config.held_width > config.d
        self.spec = StepSpec(model, space, config.loss, config.optimizer, config.steps, config.batch_size,
                             self.parallel, scaled, config.sampling.replay_rows(config.batch_size))
        self._columns = jax.device_put(Columns.of(config.d, (config.fade_columns, config.fade_steps),
                                                  config.held_width), self.parallel.replicated)
        pool = training_pool(space, config.sampling)
        rep = self.parallel.replicated
        self._pool = None if pool is None else jax.device_put((jnp.asarray(pool.ids), jnp.asarray(pool.probs)), rep)
        self._params = jax.device_put(model.params, rep)
        self.set_replay(np.zeros((0, space.width), np.int32))
        base_key = jax.random.key(config.seed)
        self._init_key = jax.random.fold_in(base_key, _INIT_STREAM)
        self._data_key = jax.device_put(jax.random.fold_in(base_key, _DATA_STREAM), rep)

    # --- state -----------------------------------------------------------------------------
    def init_state(self) -> TrainState:
        """The initial state: W from ``initial_projection`` or seeded ``config.init``, fresh AdamW, step 0.

        W is held with ``config.held_width`` columns, those beyond d zero (``TrainConfig.width``).
        """
        if self._initial is not None:
            w = jnp.asarray(self._initial)
        else:
            w = init_projection(self._init_key, self.model.residual_dim, self.config.d, self.config.init,
                                self.config.init_scale)
        w = pad_columns(w, self.config.held_width)
        return self._place(TrainState(w, self.optimizer.init(w), jnp.zeros((), jnp.int32)))

    def effective_projection(self, state: TrainState) -> np.ndarray:
        """The ``[D, d]`` W the model uses at ``state``'s step: faded columns scaled (see
        ``TrainConfig.fade_columns``), padding dropped (``TrainConfig.width``)."""
        w = np.asarray(state.projection)
        if self.spec.scaled:
            w = w * np.asarray(self._columns.scale(int(state.step)))
        return w[:, :self.config.d]

    def set_replay(self, ids: np.ndarray, seed: int = 0) -> None:
        """Draw ``config.sampling.replay_fraction`` of every later batch from these input rows
        (``[n, width]`` ids; at most a batch of them is kept, a ``seed``-ed choice; none: batches
        as usual). Callers set them between chunks, e.g. to the inputs an exactness check found
        wrong (``compression.width_search``). They are not checkpointed: a resumed run repeats
        an uninterrupted one bit for bit only with the same calls."""
        replay = Replay.of(ids, self.spec.replay_rows and self.config.batch_size, self.space.width, seed)
        self._replay = jax.device_put(replay, self.parallel.replicated)

    def _place(self, state: TrainState) -> TrainState:
        return jax.device_put(state, self.parallel.replicated)

    def record(self, step: int) -> dict[str, Any]:
        """The JSON record stored with a checkpoint (also used to check a resume is compatible)."""
        s = self.space
        return {
            "step": step,
            "config": self.config.to_dict(),
            "residual_labels": list(self.model.residual_labels),
            "space": {"vocab": [repr(v) for v in s.vocab], "token_ids": list(s.token_ids),
                      "max_seq_len": s.max_seq_len, "min_length": s.min_length,
                      "unique_tokens": s.unique_tokens},
        }

    def run_chunk(self, state: TrainState, length: int) -> tuple[TrainState, np.ndarray]:
        """``length`` fused steps from ``state``; returns the new state and ``[length, 3]`` losses."""
        state, metrics = _run_chunk(state, self._params, self._data_key, self._pool, self._columns, self._replay,
                                    spec=self.spec, length=length)
        return state, np.asarray(metrics)

    # --- the driver --------------------------------------------------------------------------
    def _resume(self, directory: Path | None) -> tuple[TrainState, list[np.ndarray]]:
        fresh = self.init_state()
        record = ckpt.read_record(directory) if directory is not None else None
        if directory is None or record is None:
            return fresh, []
        expected = self.record(record["step"])
        try:  # fields added to the config records since the checkpoint was written take their defaults
            record = {**record, "config": TrainConfig.from_dict(record["config"]).to_dict()}
        except (TypeError, KeyError, ValueError, AttributeError):
            pass  # not a readable config: the comparison below refuses it
        for field in ("config", "residual_labels", "space"):
            if record.get(field) != expected[field]:
                raise CompressionError(f"checkpoint in {directory} was written for a different {field}; "
                                 "use another checkpoint directory or the original settings")
        loaded = ckpt.load_checkpoint(directory, fresh.opt_state)
        assert loaded is not None  # its record was read above
        projection, opt_state, history, record = loaded
        state = self._place(TrainState(jnp.asarray(projection), opt_state, jnp.asarray(record["step"], jnp.int32)))
        rows = np.stack([history[name] for name in METRICS], axis=1) if history else np.zeros((0, 3), np.float32)
        return state, [rows]

    def train(
        self,
        checkpoint_dir: str | Path | None = None,
        checkpoint_every: int = 10,
        progress: bool = True,
        max_chunks: int | None = None,
        on_chunk: ChunkCallback | None = None,
    ) -> TrainResult:
        """Run (or resume) training to ``config.steps``.

        ``checkpoint_dir``: resume from its checkpoint if present, and save every
        ``checkpoint_every`` chunks and when stopping. ``max_chunks``: stop after that many
        chunks in this call (an interruption). ``on_chunk(state, losses)``: called after every
        chunk with the losses so far; returning True stops training early.
        """
        start_time = time.perf_counter()
        directory = Path(checkpoint_dir) if checkpoint_dir is not None else None
        state, rows = self._resume(directory)
        step, total, chunk = int(state.step), self.config.steps, self.config.chunk_size
        bar = tqdm(total=total, initial=step, disable=not progress, unit="step",
                   desc=f"compress d={self.config.d}", dynamic_ncols=True)
        chunks_run, stopped, saved_step = 0, False, step
        try:
            while step < total and not stopped and (max_chunks is None or chunks_run < max_chunks):
                length = min(chunk, total - step)
                state, metrics = self.run_chunk(state, length)
                rows.append(metrics)
                step += length
                chunks_run += 1
                bar.update(length)
                bar.set_postfix(loss=f"{metrics[-1, 2]:.3e}", out=f"{metrics[-1, 0]:.2e}")
                if directory is not None and (chunks_run % checkpoint_every == 0 or step == total):
                    self.save(directory, state, rows)
                    saved_step = step
                if on_chunk is not None:
                    stopped = bool(on_chunk(state, _history(rows)))
        finally:
            bar.close()
        if directory is not None and saved_step != step:
            self.save(directory, state, rows)
        return TrainResult(self.effective_projection(state), _history(rows), step,
                           time.perf_counter() - start_time, step >= total)

    def save(self, directory: str | Path, state: TrainState, rows: list[np.ndarray]) -> Path:
        """Checkpoint ``state`` and the loss history into ``directory``."""
        return ckpt.save_checkpoint(directory, state.projection, state.opt_state, _history(rows),
                                    self.record(int(state.step)))


def _history(rows: list[np.ndarray]) -> dict[str, np.ndarray]:
    table = np.concatenate(rows, axis=0) if rows else np.zeros((0, len(METRICS)), np.float32)
    return {name: np.asarray(table[:, i], np.float32) for i, name in enumerate(METRICS)}


def compress(
    model: FrozenModel, space: InputSpace, config: TrainConfig, checkpoint_dir: str | Path | None = None,
    progress: bool = True,
) -> TrainResult:
    """Train W for ``model`` on ``space`` with ``config`` (one call, resumable via checkpoints)."""
    return Compressor(model, space, config).train(checkpoint_dir=checkpoint_dir, progress=progress)
