"""Numerical -> numerical Maps: the most accurate MLP for a finite input value set, measured.

A numerical Map only ever sees the finitely many input values value inference found, so three
constructions are exact in real arithmetic on that set; they differ in how float32 rounding
turns into output error:

* ``affine`` — when f(x) = a x + b on every input value (to float64 rounding): out = a relu(x)
  - a relu(-x) + b relu(one - big bos). No ramps at all; the only error is float32 rounding of
  a x + b (relative ~1e-7).
* ``interpolation`` — the piecewise-linear interpolant through the points (x_j, f(x_j)):
  f(x_0) + sum_j (s_j - s_{j-1}) relu(x - x_j) with s_j the slope after x_j. Its error grows with
  max|x| times the total change of slope, small for smooth f (x², 1/x on values away from 0).
* ``ramps`` — the discretising step construction of :mod:`craft.chamber.numerical_mlp`, whose
  saturated steps ignore small input noise; best for thresholds and other few-step functions.

`fit_numerical_map` builds each applicable candidate, evaluates it in float32 on every input
value (and one float32 ulp either side, the rounding its input already carries), and keeps the one
with the smallest worst relative error ``|model - f(x)| / max(1, |f(x)|)``. A candidate whose
measurement would exceed `MAX_MEASURED_ENTRIES` hidden activations is skipped; when none is left
the fit is "unmeasured" with an infinite error (about 10,000 values for a smooth non-affine f). The caller (the
compiler's validation) refuses the Map when even that error exceeds `NUMERICAL_MAP_TOLERANCE`.
Every candidate writes exactly 0 at BOS, where the input is 0 (BOS-zero invariant).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from craft.bases import BasisDirection, VectorSpaceWithBasis, join_vector_spaces
from craft.blocks import MLP, activate
from craft.chamber import numerical_mlp
from craft.maps import LinearMap

# Largest worst-case relative error |model - f(x)| / max(1, |f(x)|) a compiled numerical Map may
# have on its input value set.
NUMERICAL_MAP_TOLERANCE = 1e-4

# Relative residual below which f counts as affine on its value set (float64 noise of one line).
AFFINE_TOLERANCE = 1e-9

# Hidden activations held at once while measuring (bounds memory on value sets of ~1e5 values).
_EVALUATION_ENTRIES = 20_000_000

# Most hidden activations (probes x hidden units) one candidate's measurement may compute; a
# candidate beyond it is not built (its accuracy could not be checked in reasonable time).
MAX_MEASURED_ENTRIES = 300_000_000


@dataclasses.dataclass(frozen=True)
class NumericalMapFit:
    """The chosen MLP for a numerical Map, which construction it is, and its measured error."""

    mlp: MLP
    construction: str  # "affine", "interpolation", "ramps" ("unmeasured": too large to check)
    error: float  # worst relative error over the input value set, float32 forward
    smallest_gap: float  # smallest distance between two input values (inf for one value)


def _points(f: Callable[[Any], Any], input_value_set: Iterable[Any]) -> tuple[np.ndarray, np.ndarray]:
    xs, originals = numerical_mlp.sorted_inputs(input_value_set)
    ys = numerical_mlp.target_rows(f, originals, None)[:, 0]
    return xs, ys


def affine_coefficients(xs: np.ndarray, ys: np.ndarray) -> tuple[float, float] | None:
    """(a, b) with a x + b = y on every point (to `AFFINE_TOLERANCE`), or None."""
    if xs.size == 1:
        return 0.0, float(ys[0])
    a = float((ys[-1] - ys[0]) / (xs[-1] - xs[0]))
    b = float(ys[0] - a * xs[0])
    residual = np.abs(a * xs + b - ys)
    scale = max(1.0, float(np.max(np.abs(ys))))
    if np.all(residual <= AFFINE_TOLERANCE * scale):
        return a, b
    return None


def affine_mlp(
    a: float,
    b: float,
    input_space: VectorSpaceWithBasis,
    output_space: VectorSpaceWithBasis,
    one_space: VectorSpaceWithBasis,
    bos_space: VectorSpaceWithBasis,
    hidden_name: str,
) -> MLP:
    """out = a x + b off BOS and 0 at BOS, with three ReLUs (no ramps, no discretisation)."""
    in_space = join_vector_spaces(input_space, one_space, bos_space)
    hidden = VectorSpaceWithBasis(
        tuple(BasisDirection(hidden_name, tag) for tag in ("start", "x+", "x-"))
    )
    x_row, one_row, bos_row = (
        in_space.index(s.basis[0]) for s in (input_space, one_space, bos_space)
    )
    first = np.zeros((in_space.num_dims, 3))
    first[one_row, 0] = 1.0
    first[x_row, 1:] = [1.0, -1.0]
    first[bos_row, 0] = -2.0
    second = np.array([[b], [a], [-a]], dtype=np.float64)
    return MLP(LinearMap(in_space, hidden, first), LinearMap(hidden, output_space, second))


def interpolation_mlp(
    xs: np.ndarray,
    ys: np.ndarray,
    input_space: VectorSpaceWithBasis,
    output_space: VectorSpaceWithBasis,
    one_space: VectorSpaceWithBasis,
    bos_space: VectorSpaceWithBasis,
    hidden_name: str,
) -> MLP:
    """The piecewise-linear interpolant through (xs, ys): exact at every xs in real arithmetic."""
    slopes = np.diff(ys) / np.diff(xs)
    changes = np.diff(slopes, prepend=0.0)  # slope change at xs[0 .. m-2]
    knots = np.flatnonzero(changes != 0.0)
    in_space = join_vector_spaces(input_space, one_space, bos_space)
    hidden = VectorSpaceWithBasis(
        (BasisDirection(hidden_name, "start"),)
        + tuple(BasisDirection(hidden_name, int(j)) for j in knots)
    )
    x_row, one_row, bos_row = (
        in_space.index(s.basis[0]) for s in (input_space, one_space, bos_space)
    )
    first = np.zeros((in_space.num_dims, hidden.num_dims))
    first[one_row, 0] = 1.0
    first[x_row, 1:] = 1.0
    first[one_row, 1:] = -xs[knots]
    numerical_mlp.gate_bias_at_bos(first, one_row, bos_row)
    second = np.zeros((hidden.num_dims, 1))
    second[0, 0] = ys[0]
    second[1:, 0] = changes[knots]
    return MLP(LinearMap(in_space, hidden, first), LinearMap(hidden, output_space, second))


def measured_error(
    mlp: MLP, x_direction: BasisDirection, one_direction: BasisDirection, xs: np.ndarray, ys: np.ndarray
) -> float:
    """Worst |mlp(x) - y| / max(1, |y|) in float32 at every x and one float32 ulp either side."""
    in_space = mlp.input_space
    x_row, one_row = in_space.index(x_direction), in_space.index(one_direction)
    x32 = xs.astype(np.float32)
    probes = np.stack([x32, np.nextafter(x32, np.float32(-np.inf)), np.nextafter(x32, np.float32(np.inf))])
    rows = np.zeros((probes.size, in_space.num_dims), dtype=np.float32)
    rows[:, x_row] = probes.ravel()
    rows[:, one_row] = 1.0
    first = mlp.first.matrix.astype(np.float32)
    second = mlp.second.matrix.astype(np.float32)
    chunk = max(1, _EVALUATION_ENTRIES // max(1, first.shape[1]))
    out = np.concatenate([
        (activate(mlp.activation, rows[i : i + chunk] @ first) @ second)[:, 0]
        for i in range(0, rows.shape[0], chunk)
    ]).astype(np.float64)
    expected = np.tile(ys, 3)
    return float(np.max(np.abs(out - expected) / np.maximum(1.0, np.abs(expected))))


def fit_numerical_map(
    f: Callable[[Any], Any],
    input_space: VectorSpaceWithBasis,
    output_space: VectorSpaceWithBasis,
    input_value_set: Iterable[Any],
    one_space: VectorSpaceWithBasis,
    bos_space: VectorSpaceWithBasis,
    exactness: float = 100,
    hidden_name: str = "map_hidden",
) -> NumericalMapFit:
    """The most accurate construction for `f` on its value set (see the module docstring)."""
    numerical_mlp.check_single(input_space, "input_space")
    numerical_mlp.check_single(output_space, "output_space")
    xs, ys = _points(f, input_value_set)
    directions = (input_space.basis[0], one_space.basis[0])
    gap = float(np.min(np.diff(xs))) if xs.size > 1 else float("inf")
    coefficients = affine_coefficients(xs, ys)
    if coefficients is not None:
        mlp = affine_mlp(*coefficients, input_space, output_space, one_space, bos_space, hidden_name)
        return NumericalMapFit(mlp, "affine", measured_error(mlp, *directions, xs, ys), gap)
    candidates = [
        ("interpolation", interpolation_mlp(xs, ys, input_space, output_space, one_space, bos_space, hidden_name))
    ]
    try:
        ramps = numerical_mlp.map_numerical_mlp(
            f, input_space, output_space, input_value_set, one_space, bos_space,
            exactness=exactness, hidden_name=hidden_name,
        )
        candidates.append(("ramps", ramps))
    except ValueError:
        pass  # values too close for ramps; interpolation may still be accurate
    fits = [
        NumericalMapFit(mlp, kind, measured_error(mlp, *directions, xs, ys), gap)
        for kind, mlp in candidates
        if _measurable(mlp, xs.size)
    ]
    if not fits:
        return NumericalMapFit(candidates[0][1], "unmeasured", float("inf"), gap)
    return min(fits, key=lambda fit: fit.error)


def _measurable(mlp: MLP, values: int) -> bool:
    return 3 * values * mlp.first.output_space.num_dims <= MAX_MEASURED_ENTRIES


def measurable_values() -> int:
    """Most input values a non-affine Map with one hidden unit per value can be checked on."""
    return int((MAX_MEASURED_ENTRIES / 3) ** 0.5)
