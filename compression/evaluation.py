"""Accuracy of a (compressed) model against reference outputs, e.g. from the RASP evaluator.

References are computed once per evaluation set on the host; comparing then runs on device, so
accuracy can be checked cheaply between training chunks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from compiler.model.agree import agreeing_index, twin_classes
from compiler.model.encoders import EMPTY_THRESHOLD
from compression.learned.frozen import FrozenModel
from compression.learned.projection import pad_columns
from compression.learned.sampling import InputSpace
from rasp import RaspEvaluationError

ReferenceFn = Callable[[list[Hashable]], Sequence[Any]]


@dataclasses.dataclass(frozen=True)
class ReferenceSet:
    """Evaluation inputs with the expected output at every position.

    ``targets`` holds, per position, the index of the expected output value (categorical; -1 for a
    value the model has no logit for, which no output matches) or the expected number
    (numerical); ``mask`` is 1 where a real position's reference is a value, ``none`` 1 where it
    is None. Accuracy scores both like the model's decoder reads them: a categorical position is
    right when its largest logit is its value's (or a float-rounding twin's: ``classes``, from
    `compiler.model.agree.twin_classes`) and at least ``EMPTY_THRESHOLD``, a None position when
    every logit is below it. Training reads ``targets`` and ``mask`` only.
    """

    ids: np.ndarray  # [N, T] int32
    targets: np.ndarray  # [N, T] int32 or float32
    mask: np.ndarray  # [N, T] float32
    kind: str  # "categorical" | "numerical"
    none: np.ndarray | None = None  # [N, T] float32 (None: no position's reference is None)
    defined: np.ndarray | None = None  # [N] bool: inputs RASP gives an output for (None: all)
    classes: np.ndarray | None = None  # [V] int32: each output value's twin class (None: every value its own)

    @property
    def checked(self) -> int:
        """How many inputs are scored: those inside the program's domain."""
        return len(self.ids) if self.defined is None else int(self.defined.sum())

    @property
    def scored(self) -> np.ndarray:
        """[N, T] float32: 1 where a position is scored (a value or None)."""
        return self.mask if self.none is None else np.maximum(self.mask, self.none)


def build_reference_set(
    ids: np.ndarray, space: InputSpace, reference_fn: ReferenceFn, kind: str,
    output_values: Sequence[Hashable] | None = None,
) -> ReferenceSet:
    """Run ``reference_fn`` on the tokens of every row of ``ids``.

    For categorical outputs ``output_values`` lists the values in logit order; a reference value's
    target is the value that agrees with it (`compiler.model.agree.agreeing_index`: the equal one,
    else a float-rounding twin of it), -1 when none does (no output matches it). A None reference is scored as None at a
    categorical output; a numerical output has no None (it is not scored there). An input the
    evaluator rejects (``rasp.RaspEvaluationError``: outside the program's domain, e.g. a
    categorical Aggregate selecting different values) has no reference and is not scored.
    """
    ids = np.asarray(ids, np.int32)
    dtype = np.int32 if kind == "categorical" else np.float32
    targets = np.zeros(ids.shape, dtype)
    mask = np.zeros(ids.shape, np.float32)
    none = np.zeros(ids.shape, np.float32)
    defined = np.ones(len(ids), bool)
    values = tuple(output_values or ())
    index = {v: i for i, v in enumerate(values)}
    for r, row in enumerate(ids):
        try:
            outputs = reference_fn(space.decode(row))
        except RaspEvaluationError:
            defined[r] = False
            continue
        for p, value in enumerate(outputs, start=1):
            if value is None:
                none[r, p] = float(kind == "categorical")
                continue
            if kind == "categorical":
                if value not in index:  # a float-rounding twin of an output value, or no value at all
                    index[value] = agreeing_index(values, value)
                targets[r, p] = index[value]
            else:
                targets[r, p] = float(value)
            mask[r, p] = 1.0
    classes = twin_classes(values) if kind == "categorical" else None
    return ReferenceSet(ids, targets, mask, kind, none, defined, classes)


def nearest_value_tolerance(refs: ReferenceSet) -> float:
    """Half the smallest gap between distinct numerical reference values.

    A prediction within this distance of its reference is closer to it than to any other value
    the program outputs on these inputs, so rounding to the nearest value decodes it right.
    """
    values = np.unique(np.round(refs.targets[refs.mask > 0].astype(np.float64), 9))
    if len(values) < 2:
        return 0.5
    return float(np.min(np.diff(values)) / 2)


def predict(model: FrozenModel, projection: jax.Array | None, ids: jax.Array) -> jax.Array:
    """Predicted value index (categorical) or value (numerical) per position."""
    out = model.forward(model.params, ids, projection=projection).output
    return jnp.argmax(out, axis=-1) if model.output_kind == "categorical" else out


@dataclasses.dataclass(frozen=True)
class Accuracy:
    """Fraction of scored positions right, of sequences right at every scored position, and
    (numerical outputs) the mean squared error over scored positions (NaN for categorical)."""

    position: float
    sequence: float
    mse: float = float("nan")


def accuracy(
    model: FrozenModel, projection: jax.Array | np.ndarray | None, refs: ReferenceSet, atol: float = 0.02,
    batch_size: int = 4096,
) -> Accuracy:
    """Accuracy of ``model`` (compressed by ``projection``, or not) on ``refs``.

    Numerical positions count as right within ``atol`` of the reference. Each batch of
    ``batch_size`` inputs is scored and reduced on the device; only four numbers per batch come
    back to the host. A ``[D, d]`` W is padded with zero columns to ``[D, D]``
    (:func:`~compression.learned.projection.pad_columns`: the same outputs), so every width
    shares one compiled forward pass.
    """
    totals, _ = _score(model, projection, refs, atol, batch_size)
    good_pos, good_seq, n_pos, sq = totals
    mse = sq / max(n_pos, 1.0) if refs.kind == "numerical" else float("nan")
    return Accuracy(good_pos / max(n_pos, 1.0), int(good_seq) / max(len(refs.ids), 1), mse)


def sequences_right(
    model: FrozenModel, projection: jax.Array | np.ndarray | None, refs: ReferenceSet, atol: float = 0.02,
    batch_size: int = 4096, shared_shape: bool = True,
) -> np.ndarray:
    """``[N]`` bool: whether every scored position of each input of ``refs`` is right (as in
    :func:`accuracy`, which counts them; one byte per input comes back to the host).
    ``shared_shape`` False runs W at its own width (cheaper for one W than the padded ``[D, D]``
    every width shares)."""
    return _score(model, projection, refs, atol, batch_size, shared_shape)[1]


def _score(model: FrozenModel, projection: jax.Array | np.ndarray | None, refs: ReferenceSet, atol: float,
           batch_size: int, shared_shape: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The four totals of :func:`_scores_fn` over ``refs`` and the per-input right flags."""
    fn = _scores_fn(model, refs.kind, atol)
    if projection is None:
        proj = None
    else:
        proj = pad_columns(projection, model.residual_dim) if shared_shape else jnp.asarray(projection, jnp.float32)
    totals = np.zeros(4, np.float64)  # right positions, right sequences, scored positions, squared error
    flags = []
    none = refs.none if refs.none is not None else np.zeros(refs.mask.shape, np.float32)
    classes = None if refs.classes is None else jnp.asarray(refs.classes)
    for start in range(0, len(refs.ids), batch_size):
        sl = slice(start, start + batch_size)
        rows = len(refs.ids[sl])
        size = _bucket(rows, batch_size)
        ids = _padded(refs.ids[sl], size, np.repeat(refs.ids[sl][:1], size - rows, axis=0))
        targets, mask, nones = (_padded(a[sl], size, np.zeros((size - rows, *a.shape[1:]), a.dtype))
                                for a in (refs.targets, refs.mask, none))
        batch_totals, right = fn(model.params, proj, ids, targets, mask, nones, classes)
        totals += np.asarray(batch_totals, np.float64)
        totals[1] -= len(ids) - rows  # a padding row scores nothing, so it counts as a right sequence
        flags.append(np.asarray(right)[:rows])
    return totals, np.concatenate(flags) if flags else np.zeros(0, bool)


def _bucket(rows: int, batch_size: int) -> int:
    """The batch shape ``rows`` inputs are scored at: the next power of two (at least 64), at most
    ``batch_size``, so sets of slightly different sizes (a sampled check's inputs plus a bound's
    tightest ones) share one compiled scorer."""
    return min(batch_size, max(64, 1 << max(rows - 1, 0).bit_length()))


def _padded(rows: np.ndarray, size: int, fill: np.ndarray) -> np.ndarray:
    """``rows`` with ``fill`` appended when they are fewer than ``size`` (a padding row repeats a
    real input and has no scored position, so it changes no total but the right sequences)."""
    return rows if len(rows) >= size else np.concatenate([rows, fill])


_SCORES_CACHE: dict[tuple[Callable, str, float], Callable] = {}


def _scores_fn(model: FrozenModel, kind: str, atol: float) -> Callable:
    """Jitted ``(params, projection, ids, targets, mask, none, classes) -> ([4], [B])``: right positions,
    right sequences, scored positions and summed squared error (0 for categorical outputs) of one
    batch, and whether each input is right at every scored position (categorical positions read
    as the model's decoder reads them, :class:`ReferenceSet`)."""
    key = (model.forward, kind, atol)
    if key not in _SCORES_CACHE:
        forward = model.forward

        def scores(params, projection, ids, targets, mask, none, classes):
            out = forward(params, ids, projection=projection).output
            if kind == "categorical":
                top = jnp.max(out, axis=-1) if out.shape[-1] else jnp.full(targets.shape, -jnp.inf)
                shown = top >= EMPTY_THRESHOLD
                best = jnp.argmax(out, axis=-1) if out.shape[-1] else jnp.full(targets.shape, -1)
                same = best == targets
                if classes is not None and classes.shape[0]:  # a twin of the expected value is right too
                    same |= (targets >= 0) & (classes[jnp.maximum(best, 0)] == classes[jnp.maximum(targets, 0)])
                right = jnp.where(none > 0, ~shown, shown & same)
                err = jnp.zeros(targets.shape, jnp.float32)
                weight = jnp.maximum(mask, none)
            else:
                right = jnp.abs(out - targets) <= atol
                err = jnp.square(out - targets)
                weight = mask
            scored = weight > 0
            whole = jnp.all(right | ~scored, axis=1)
            return jnp.stack([jnp.sum(right * weight), jnp.sum(whole).astype(jnp.float32), jnp.sum(weight),
                              jnp.sum(err * mask)]), whole

        _SCORES_CACHE[key] = jax.jit(scores)
    return _SCORES_CACHE[key]
