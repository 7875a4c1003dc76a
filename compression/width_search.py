"""The smallest residual width d at which each compression method is exact.

Methods: the two analytic projections (``random``, ``packed``: exactness claimed by the bound and
measured), PCA of the compiled activations, and gradient descent (the existing trainer, run as a
:class:`~compression.learned.config.GDRecipe`) from an orthogonal start or from the packed projection.

Analytic and PCA widths come from a binary search over d (:func:`smallest_exact`), which assumes
exactness is monotone in d; the claimed width of an analytic method is the first d, scanning
upwards, whose bound claims exactness. GD is not monotone in d (a seed can fail at d + 1 and
succeed at d), so its widths come from a downward scan (:func:`gd_width_scan`) that tries every
width, several seeds each, and stops only after ``patience`` unreached widths in a row.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Literal

import jax.numpy as jnp
import numpy as np

from compiler.errors import CompressionError
from compression.analysis import pca_baseline
from compression.analytic.bound import interference_bound
from compression.analytic.packing import Method, make_projection, min_width, packed_projection, packed_width
from compression.analytic.structure import ResidualStructure
from compression.exactness import ExactnessCheck
from compression.learned.config import GDRecipe, TrainConfig
from compression.learned.losses import position_mask
from compression.learned.train import Compressor


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
        if interference_bound(structure, make_projection(structure, method, d, seed)).claims_exact:
            return d
    return None


def analytic_exact_width(check: ExactnessCheck, structure: ResidualStructure, method: Method,
                         seed: int = 0) -> int | None:
    """Smallest measured-exact d of an analytic method."""
    return smallest_exact(lambda d: check.is_exact(make_projection(structure, method, d, seed)),
                          min_width(structure, method), structure.residual_dim)


def pca_projection(check: ExactnessCheck, d: int) -> np.ndarray:
    """PCA (uncentred, so the constant ``one`` direction survives) of the compiled residual
    snapshots on the check's inputs."""
    model = check.task.model
    mask = np.asarray(position_mask(jnp.asarray(check.refs.ids), model.bos_id, model.pad_id))
    return pca_baseline(check.compiled_residuals, mask, d, center=False).projection


def pca_exact_width(check: ExactnessCheck) -> int | None:
    """Smallest measured-exact d of the PCA baseline."""
    return smallest_exact(lambda d: check.is_exact(pca_projection(check, d)), 1, check.task.model.residual_dim)


GDInit = Literal["orthogonal", "packed", "packed_truncated"]
# share of a shrink step's budget over which the dropped column fades out
SHRINK_FADE = 0.25
GD_INITS: tuple[str, ...] = ("orthogonal", "packed", "packed_truncated")


@dataclasses.dataclass(frozen=True)
class GDRun:
    """One gradient-descent run at width ``d``, stopped as soon as it is exact."""

    d: int
    init: str  # see :func:`gd_start`
    seed: int
    exact: bool
    steps_to_exact: int | None
    steps: int  # steps run
    wall_s: float
    steps_per_s: float  # training steps per second after the first chunk (compilation, checks excluded)
    sequence_accuracy: float  # of the final W on the check's inputs


def truncated_projection(projection: np.ndarray, d: int) -> np.ndarray:
    """The best rank-``d`` approximation of ``W Wᵀ`` as a ``[D, d]`` W: the rows of ``projection``
    projected onto its top ``d`` right singular directions (``projection`` itself when it has <= d
    columns, padded with zero columns)."""
    w = np.asarray(projection, np.float64)
    if w.shape[1] <= d:
        return np.pad(w, ((0, 0), (0, d - w.shape[1]))).astype(np.float32)
    _, _, vt = np.linalg.svd(w, full_matrices=False)
    return (w @ vt[:d].T).astype(np.float32)


def gd_start(init: str, d: int, structure: ResidualStructure | None, seed: int = 0,
             packed_exact: int | None = None) -> tuple[np.ndarray | None, str]:
    """The initial W of a GD run and the name of what it is (None: the trainer's orthogonal init).

    * ``"orthogonal"``: the trainer's seeded orthonormal columns;
    * ``"packed"``: :func:`~compression.analytic.packed_projection` at ``d`` itself (narrowed codes
      below its full-margin width);
    * ``"packed_truncated"``: the packed projection at ``packed_exact`` (a width where it is exact,
      default its full-margin width) with its protected axes kept and its code columns cut to
      their best rank-(d - p) approximation (:func:`truncated_projection`): the codes lose their
      weakest shared directions instead of being rebuilt narrower.

    Where the construction does not exist (d too small) the start is orthogonal and the name says so.
    """
    if init == "orthogonal":
        return None, init
    if init not in GD_INITS:
        raise CompressionError(f"unknown init {init!r}; use one of {', '.join(GD_INITS)}")
    if structure is None:
        raise CompressionError(f"init={init!r} needs the model's ResidualStructure")
    p = len(structure.protected)
    if init == "packed":
        if d >= min_width(structure, "packed"):
            return packed_projection(structure, d, seed), init
        return None, "orthogonal (packed needs more width)"
    if d <= p:
        return None, "orthogonal (truncated packed needs more width)"
    source = packed_projection(structure, packed_exact or packed_width(structure, seed), seed)
    return np.concatenate([source[:, :p], truncated_projection(source[:, p:], d - p)], axis=1), init


def gd_run(check: ExactnessCheck, d: int, recipe: GDRecipe = GDRecipe(), init: str = "orthogonal",
           structure: ResidualStructure | None = None, seed: int = 0, packed_exact: int | None = None,
           projection: np.ndarray | None = None) -> tuple[GDRun, np.ndarray]:
    """Train W at width ``d`` with ``recipe`` and ``seed``, checking exactness every
    ``recipe.check_every`` steps and stopping at the first exact check (see :func:`gd_start`
    for ``init``; a given starting ``projection`` is used instead, under the name ``init``).
    Returns the run and its final W."""
    if projection is None:
        projection, init = gd_start(init, d, structure, seed, packed_exact)
    return _train_until_exact(check, recipe.train_config(d, seed, check.task.model.residual_dim), projection, init)


def gd_fade_run(check: ExactnessCheck, projection: np.ndarray, recipe: GDRecipe = GDRecipe(), seed: int = 0,
                fade_fraction: float = SHRINK_FADE) -> tuple[GDRun, np.ndarray]:
    """Shrink ``projection`` (``[D, n]``) by one column with GD: rotate it so that its last column is
    its weakest singular direction (``W Wᵀ`` is unchanged, so an exact W stays exact), then train
    at width n while that column fades to 0 over ``fade_fraction`` of the budget; exactness of the
    first n - 1 columns is checked once the column is gone. Returns the run (at width n - 1) and
    the ``[D, n - 1]`` W."""
    w = np.asarray(projection, np.float64)
    _, _, vt = np.linalg.svd(w, full_matrices=False)
    rotated = (w @ vt.T).astype(np.float32)  # strongest direction first
    config = dataclasses.replace(recipe.train_config(w.shape[1], seed, check.task.model.residual_dim), fade_columns=1,
                                 fade_fraction=fade_fraction)
    return _train_until_exact(check, config, rotated, "packed_shrink")


def _train_until_exact(check: ExactnessCheck, config: TrainConfig, projection: np.ndarray | None,
                       init: str) -> tuple[GDRun, np.ndarray]:
    """The trainer from ``projection`` with ``config``, stopped at the first chunk whose W (without
    faded columns, once they are gone) is exact on the check's inputs."""
    task = check.task
    kept = config.d - config.fade_columns
    compressor = Compressor(task.model, task.space, config, initial_projection=projection)
    start_w = np.asarray(compressor.init_state().projection)[:, :config.d]
    if not config.fade_columns and check.is_exact(start_w):
        return GDRun(kept, init, config.seed, True, 0, 0, 0.0, float("nan"), 1.0), start_w
    marks: list[tuple[int, float]] = []  # (step, training seconds so far) after each chunk
    found: list[int] = []
    evaluating = [0.0]

    def on_chunk(state, history) -> bool:
        step = len(history["total"])
        now = time.perf_counter()
        marks.append((step, now - start - evaluating[0]))
        exact = False
        if step >= config.fade_steps:
            wrong = check.wrong_inputs(np.asarray(state.projection)[:, :kept])
            exact = len(wrong) == 0
            compressor.set_replay(check.refs.ids[wrong], seed=step)  # SamplingConfig.replay_fraction
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
    final_w = np.asarray(result.projection)[:, :kept]
    final = 1.0 if found else check.sequence_accuracy(final_w)
    run = GDRun(kept, init, config.seed, bool(found), found[0] if found else None, result.steps_done, wall, rate, final)
    return run, final_w


def gd_shrink_scan(check: ExactnessCheck, projection: np.ndarray, recipe: GDRecipe = GDRecipe(), seed: int = 0,
                   patience: int = 2, lo: int = 1, fade_fraction: float = SHRINK_FADE) -> GDScan:
    """GD from an exact W downwards one width at a time (:func:`gd_fade_run`, :func:`scan_down`):
    each width starts from the previous width's W (the exact one when a seed reached it, else the
    last seed's), and the scan stops after ``patience`` unreached widths in a row or at ``lo``."""
    runs: list[GDRun] = []
    current = [np.asarray(projection)]

    def reaches(d: int) -> bool:
        for k in range(recipe.seeds):
            run, narrower = gd_fade_run(check, current[0], recipe, seed + k, fade_fraction)
            runs.append(run)
            if run.exact:
                break
        current[0] = narrower
        return run.exact

    tried, reached = scan_down(range(current[0].shape[1] - 1, max(lo, 1) - 1, -1), reaches, patience)
    return GDScan("packed_shrink", tuple(tried), tuple(reached), tuple(runs))


def scan_down(widths: Sequence[int], reaches: Callable[[int], bool], patience: int = 2,
              misses: int = 0) -> tuple[list[int], list[int]]:
    """Try ``widths`` in the given order (largest first) and stop after ``patience`` consecutive
    widths that are not reached (``misses`` of them already seen); returns (widths tried, widths
    reached).

    Unlike a binary search this assumes nothing about monotonicity: every width reported as
    reached was tried and reached, and a failure only ends the scan after ``patience`` in a row.
    """
    if patience < 1:
        raise CompressionError(f"patience must be >= 1, got {patience}")
    tried, reached = [], []
    for d in widths:
        tried.append(d)
        if reaches(d):
            reached.append(d)
            misses = 0
        else:
            misses += 1
            if misses >= patience:
                break
    return tried, reached


def scan_from(start: int, lo: int, hi: int, reaches: Callable[[int], bool],
              patience: int = 2) -> tuple[list[int], list[int]]:
    """Scan widths around a likely one: from ``start`` upwards until one is reached (at most
    ``hi``), then from ``start - 1`` downwards to ``lo`` like :func:`scan_down`, where the
    unreached widths just above count as misses in a row. Returns (widths tried, widths reached).

    It spends its runs near ``start`` (the sweep passes the packed projection's exact width) instead
    of descending from D, which for wide models is most of the cost.
    """
    if not lo <= start <= hi:
        raise CompressionError(f"start={start} is outside [{lo}, {hi}]")
    tried, reached = [], []
    for d in range(start, hi + 1):
        tried.append(d)
        if reaches(d):
            reached.append(d)
            break
    misses = len(tried) - len(reached)
    if not reached or misses >= patience:
        return tried, reached
    below_tried, below_reached = scan_down(range(start - 1, lo - 1, -1), reaches, patience, misses)
    return tried + below_tried, reached + below_reached


@dataclasses.dataclass(frozen=True)
class GDScan:
    """A downward scan of GD over widths: what was tried, what was reached, every run."""

    init: str
    tried: tuple[int, ...]
    reached: tuple[int, ...]  # widths where at least one seed became exact within the budget
    runs: tuple[GDRun, ...]

    @property
    def smallest(self) -> int | None:
        """The smallest width reached (None: none of the tried widths)."""
        return min(self.reached) if self.reached else None

    def median_steps_to_exact(self, d: int) -> float | None:
        """Median steps to exactness over the seeds that reached width ``d``."""
        steps = [r.steps_to_exact for r in self.runs if r.d == d and r.exact and r.steps_to_exact is not None]
        return float(np.median(steps)) if steps else None


def gd_width_scan(check: ExactnessCheck, widths: Sequence[int], recipe: GDRecipe = GDRecipe(),
                  init: str = "orthogonal", structure: ResidualStructure | None = None, seed: int = 0,
                  patience: int = 2, packed_exact: int | None = None, start: int | None = None) -> GDScan:
    """Scan ``widths`` downwards (:func:`scan_down`), or, given ``start``, around it
    (:func:`scan_from` over ``min(widths)..max(widths)``): at each width run seeds ``seed ..
    seed + recipe.seeds - 1`` until one is exact; a width is reached when one is."""
    runs: list[GDRun] = []

    def reaches(d: int) -> bool:
        for k in range(recipe.seeds):
            run, _ = gd_run(check, d, recipe, init, structure, seed + k, packed_exact)
            runs.append(run)
            if run.exact:
                return True
        return False

    if start is None:
        tried, reached = scan_down(sorted(widths, reverse=True), reaches, patience)
    else:
        tried, reached = scan_from(start, min(widths), max(widths), reaches, patience)
    label = runs[0].init if runs else init
    return GDScan(label, tuple(tried), tuple(reached), tuple(runs))
