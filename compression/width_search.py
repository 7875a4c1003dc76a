"""The smallest residual width d at which each compression method is exact.

Methods: the two analytic projections (``random``, ``packed``: exactness claimed by the bound and
measured), PCA of the compiled activations, and gradient descent (the existing trainer) from an
orthogonal start or from the packed projection. Measured widths come from a binary search over
d, which assumes exactness is monotone in d (more room never hurts); the claimed width of an
analytic method is the first d, scanning upwards, whose bound claims exactness.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import jax.numpy as jnp
import numpy as np

from compression.analysis import pca_baseline
from compression.analytic import Method, interference_bound, min_width, packed_projection, projection
from compression.config import OptimizerConfig, TrainConfig
from compression.exactness import ExactnessCheck
from compression.losses import position_mask
from compression.structure import ResidualStructure
from compression.train import Compressor


def smallest_exact(is_exact: Callable[[int], bool], lo: int, hi: int) -> int | None:
    """Binary search for the smallest d in ``[lo, hi]`` with ``is_exact(d)``; None if ``hi`` fails."""
    if lo > hi or not is_exact(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if is_exact(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def claimed_width(structure: ResidualStructure, method: Method, seed: int = 0) -> int | None:
    """The first d (up to D) at which the method's bound claims exactness."""
    for d in range(min_width(structure, method), structure.residual_dim + 1):
        if interference_bound(structure, projection(structure, method, d, seed)).claims_exact:
            return d
    return None


def analytic_exact_width(check: ExactnessCheck, structure: ResidualStructure, method: Method,
                         seed: int = 0) -> int | None:
    """Smallest measured-exact d of an analytic method."""
    return smallest_exact(lambda d: check.is_exact(projection(structure, method, d, seed)),
                          min_width(structure, method), structure.residual_dim)


def pca_projection(check: ExactnessCheck, d: int) -> np.ndarray:
    """PCA (uncentred, so the constant ``one`` direction survives) of the compiled residual
    snapshots on the check's inputs."""
    model = check.task.model
    ids = jnp.asarray(check.refs.ids)
    residuals = [np.asarray(r) for r in model.forward(model.params, ids).residuals]
    mask = np.asarray(position_mask(ids, model.bos_id, model.pad_id))
    return pca_baseline(residuals, mask, d, center=False).projection


def pca_exact_width(check: ExactnessCheck) -> int | None:
    """Smallest measured-exact d of the PCA baseline."""
    return smallest_exact(lambda d: check.is_exact(pca_projection(check, d)), 1, check.task.model.residual_dim)


@dataclasses.dataclass(frozen=True)
class GDRun:
    """One gradient-descent run at width ``d``, stopped as soon as it is exact."""

    d: int
    init: str  # "orthogonal" or "packed"
    exact: bool
    steps_to_exact: int | None
    steps: int  # steps run
    wall_s: float
    steps_per_s: float  # training steps per second after the first chunk (compilation, checks excluded)
    sequence_accuracy: float  # of the final W on the check's inputs


def gd_run(check: ExactnessCheck, d: int, steps: int, init: str = "orthogonal", structure: ResidualStructure | None = None,
           seed: int = 0, chunk: int = 250, lr: float = 1e-2, batch_size: int = 256,
           weight_decay: float = 0.0) -> GDRun:
    """Train W at width ``d`` for up to ``steps`` steps, checking exactness after every chunk.

    ``init="packed"`` starts from :func:`~compression.analytic.packed_projection` (needs
    ``structure``; below its smallest width it falls back to orthogonal and says so in ``init``).
    """
    task = check.task
    initial = None
    if init == "packed":
        if structure is None:
            raise ValueError("init='packed' needs the model's ResidualStructure")
        if d >= min_width(structure, "packed"):
            initial = packed_projection(structure, d, seed)
        else:
            init = "orthogonal (packed needs more width)"
    elif init != "orthogonal":
        raise ValueError(f"unknown init {init!r}; use 'orthogonal' or 'packed'")
    config = TrainConfig(d=d, steps=steps, batch_size=batch_size, chunk_size=min(chunk, steps), seed=seed,
                         optimizer=OptimizerConfig(lr_init=lr, weight_decay=weight_decay))
    compressor = Compressor(task.model, task.space, config, initial_projection=initial)
    start_w = np.asarray(compressor.init_state().projection)
    if check.is_exact(start_w):
        return GDRun(d, init, True, 0, 0, 0.0, float("nan"), 1.0)
    marks: list[tuple[int, float]] = []  # (step, training seconds so far) after each chunk
    found: list[int] = []
    evaluating = [0.0]

    def on_chunk(state, history) -> bool:
        step = len(history["total"])
        now = time.perf_counter()
        marks.append((step, now - start - evaluating[0]))
        exact = check.is_exact(np.asarray(state.projection))
        evaluating[0] += time.perf_counter() - now
        if exact:
            found.append(step)
        return exact

    start = time.perf_counter()
    result = compressor.train(progress=False, on_chunk=on_chunk)
    wall = time.perf_counter() - start
    rate = float("nan")
    if len(marks) >= 2:
        (s0, t0), (s1, t1) = marks[0], marks[-1]
        rate = (s1 - s0) / max(t1 - t0, 1e-9)
    final = 1.0 if found else check.sequence_accuracy(result.projection)
    return GDRun(d, init, bool(found), found[0] if found else None, result.steps_done, wall, rate, final)


def gd_exact_width(check: ExactnessCheck, steps: int, hi: int, init: str = "orthogonal",
                   structure: ResidualStructure | None = None, seed: int = 0,
                   runs: list[GDRun] | None = None, lo: int = 1) -> int | None:
    """Smallest d in ``[lo, hi]`` where GD reaches exactness within ``steps`` (every run appended to ``runs``)."""
    def exact(d: int) -> bool:
        run = gd_run(check, d, steps, init, structure, seed)
        if runs is not None:
            runs.append(run)
        return run.exact

    return smallest_exact(exact, lo, hi)
