"""MLPs for Maps on a numerical input (one direction), built on its finite value set.

Construction ("discretising" piecewise-linear MLP). Let x_0 < x_1 < ... < x_{m-1} be the distinct
input values and T_j the target written for x_j (the number f(x_j), or the one-hot of f(x_j) for a
categorical output). A ramp is placed only between neighbours whose targets differ: for such a pair
(x_{i-1}, x_i) with gap g_i and midpoint b_i, with sharpness k_i and slope s_i = k_i / g_i,

    step_i(x) = relu(s_i (x - c_i) + 1/2) - relu(s_i (x - c_i) - 1/2)   (0 below, 1 above, width 1/s_i)

where the centre c_i is b_i moved by at most half a ramp width so that s_i c_i is an integer: the
pair's biases are then exactly -s_i c_i +- 1/2 in float32 and a saturated ramp contributes exactly 1.
The output is T_0 + sum_i (T_i - T_{i-1}) step_i(x); the constant T_0 goes through a hidden unit
`relu(one - large * bos)`. Hidden width: 1 + 2 * (number of value changes).

Sharpness. k_i = exactness, lowered where the ramp's largest pre-activation over the value set
(k_i * reach_i / g_i, reach_i the distance from b_i to the farthest value) would exceed
`MAX_PRE_ACTIVATION`, but never below `MIN_SHARPNESS` = 4. Saturated ramps feed those
pre-activations to the second layer, where float32 rounding turns them into output error; the cap
keeps numerical outputs within ~1e-4 even on dense value sets (means over 32 positions).

Exactness (requires exactness >= 4). Ramp i is flat (exactly 0 or 1) beyond g_i / k_i of b_i
(half a width plus the centring shift). Hence the MLP writes exactly T_j (up to float rounding of
the telescoping sum) for every input x with

    |x - x_j| <= (g / 2) * (1 - 2 / k),   g and k of the nearest ramp (window >= g / 4),

in particular on every x_j itself. Inside a ramp (only reachable by inputs off the value set) the
output interpolates linearly between neighbouring targets. Values closer than `MIN_RESOLVABLE_GAP`
(relative to the input scale) that need different outputs cannot be separated by a float32 model;
such value sets raise ValueError naming the two values.

BOS: every hidden unit with a bias from `one` also gets weight -(|bias| + 1) from the BOS
direction; the numerical input is 0 at BOS (BOS-zero invariant), so all units are off there and
the block writes exactly 0 at BOS. Outputs can be negative and f arbitrary.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import numpy as np

from craft.bases import BasisDirection, VectorSpaceWithBasis, join_vector_spaces
from craft.blocks import MLP
from craft.maps import LinearMap

# Smallest gap, relative to max(1, max|x|), between two inputs with different targets that a
# float32 model separates reliably (float32 resolves about 1.2e-7 relative).
MIN_RESOLVABLE_GAP = 1e-5

# Relative difference below which two targets count as the same output (float64 rounding noise
# of one real number, far below what a float32 model resolves).
TARGET_TOLERANCE = 1e-9

# Largest ramp pre-activation (in ramp widths) the construction aims for. Saturated ramps carry
# pre-activations up to this size into the second layer, where float32 rounding at ~6e-8 of it
# becomes output error; 256 keeps the error below ~1e-4 even for means over 32 positions.
MAX_PRE_ACTIVATION = 256.0

# Smallest ramp sharpness: with ramps centred on an integer pre-activation (a shift of up to half a
# ramp width), k >= 4 leaves every value at least a quarter gap away from its neighbouring ramps.
MIN_SHARPNESS = 4.0


def sorted_inputs(input_value_set: Iterable[Any]) -> tuple[np.ndarray, list[Any]]:
    """Distinct finite numeric input values sorted, as floats and as the original objects
    (which are what `f` is called on). None entries are ignored."""
    values: dict[float, Any] = {}
    for v in input_value_set:
        if v is None:
            continue
        try:
            fv = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"numerical MLP: input value {v!r} is not a number") from None
        if not math.isfinite(fv):
            raise ValueError(f"numerical MLP: input value {v!r} is not finite")
        values.setdefault(fv, v)
    if not values:
        raise ValueError("numerical MLP: the input value set is empty")
    xs = sorted(values)
    return np.array(xs), [values[x] for x in xs]


def check_single(space: VectorSpaceWithBasis, what: str) -> None:
    if space.num_dims != 1:
        raise ValueError(f"{what} must have exactly one direction, got {space.num_dims}")


def _ramps(targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the output must change between neighbouring inputs, and by how much.

    Returns `changes` (ramp k sits between xs[changes[k]] and xs[changes[k] + 1]) and the row
    `deltas[k]` it adds. Targets within `TARGET_TOLERANCE` (relative) of the current output level
    count as equal: float64 rounding makes one real number appear as several neighbouring floats
    (a mean summed in different orders, then `1 - x`), whose targets differ only in the last bits;
    they need no ramp, and the level is tracked so skipped differences never accumulate.
    """
    m = targets.shape[0]
    width = targets.shape[1] if targets.ndim == 2 else 1
    if m == 0 or width == 0:  # nothing to write (e.g. a categorical output that is always None)
        return np.zeros(0, dtype=np.int64), np.zeros((0, width))
    tolerance = TARGET_TOLERANCE * max(1.0, float(np.max(np.abs(targets))))
    level = targets[0] if m else None
    changes, deltas = [], []
    for i in range(1, m):
        delta = targets[i] - level
        if np.max(np.abs(delta)) > tolerance:
            changes.append(i - 1)
            deltas.append(delta)
            level = targets[i]
    return np.array(changes, dtype=np.int64), np.array(deltas, dtype=np.float64).reshape(-1, width)


def _first_unresolvable(xs: np.ndarray, changes: np.ndarray) -> tuple[float, float] | None:
    """The first pair of neighbouring inputs that need different outputs but are too close."""
    gaps = xs[changes + 1] - xs[changes]
    scale = max(1.0, float(np.max(np.abs(xs)))) if len(xs) else 1.0
    too_close = np.flatnonzero(gaps < MIN_RESOLVABLE_GAP * scale)
    if not too_close.size:
        return None
    i = changes[too_close[0]]
    return float(xs[i]), float(xs[i + 1])


def target_rows(f: Callable[[Any], Any], originals: list[Any], output_values: list[Hashable] | None) -> np.ndarray:
    """Per-input target rows: f(x) (numerical output) or its one-hot over `output_values`."""
    if output_values is None:
        targets = np.zeros((len(originals), 1))
        for j, x in enumerate(originals):
            y = f(x)
            if y is None:
                raise ValueError(f"map_numerical_mlp: f({x!r}) is None; a numerical output needs a number")
            targets[j, 0] = float(y)
        if not np.all(np.isfinite(targets)):
            raise ValueError("map_numerical_mlp: f returned a non-finite value")
        return targets
    column = {value: k for k, value in enumerate(output_values)}
    targets = np.zeros((len(originals), len(output_values)))
    for j, x in enumerate(originals):
        y = f(x)
        if y is not None and y in column:
            targets[j, column[y]] = 1.0
    return targets


def unresolvable_inputs(
    f: Callable[[Any], Any], input_value_set: Iterable[Any], output_values: Iterable[Hashable] | None
) -> tuple[float, float] | None:
    """Two input values a discretising MLP for `f` cannot separate in float32, or None.

    `output_values` is None for a numerical output, else the categorical output's values. The
    compiler's validation calls this so such Maps are refused with a message instead of failing
    while the MLP is built.
    """
    xs, originals = sorted_inputs(input_value_set)
    values = None if output_values is None else list(output_values)
    changes, _ = _ramps(target_rows(f, originals, values))
    return _first_unresolvable(xs, changes)


def _discretising_mlp(
    xs: np.ndarray,
    targets: np.ndarray,
    input_space: VectorSpaceWithBasis,
    output_space: VectorSpaceWithBasis,
    one_space: VectorSpaceWithBasis,
    bos_space: VectorSpaceWithBasis,
    exactness: float,
    hidden_name: str,
) -> MLP:
    """The ramp construction for sorted inputs `xs` and per-value target rows `targets` (m, d_out)."""
    check_single(input_space, "input_space")
    check_single(one_space, "one_space")
    check_single(bos_space, "bos_space")
    if not exactness >= MIN_SHARPNESS:
        raise ValueError(f"exactness must be >= {MIN_SHARPNESS:g}, got {exactness}")
    changes, deltas = _ramps(targets)
    pair = _first_unresolvable(xs, changes)
    if pair is not None:
        low, high = pair
        raise ValueError(
            f"inputs {low!r} and {high!r} are only {high - low:.3g} apart but need "
            "different outputs; a float32 model cannot separate them (round the values upstream)"
        )
    gaps = xs[changes + 1] - xs[changes]
    hidden = VectorSpaceWithBasis(
        (BasisDirection(hidden_name, "start"),)
        + tuple(BasisDirection(hidden_name, (int(i) + 1, side)) for i in changes for side in (0, 1))
    )
    in_space = join_vector_spaces(input_space, one_space, bos_space)
    x_row = in_space.index(input_space.basis[0])
    one_row = in_space.index(one_space.basis[0])
    bos_row = in_space.index(bos_space.basis[0])

    first = np.zeros((in_space.num_dims, hidden.num_dims))
    first[one_row, 0] = 1.0
    if changes.size:
        mids = (xs[changes] + xs[changes + 1]) / 2
        # Sharpness k_i = exactness, lowered where the ramp's largest pre-activation over the
        # value set (k_i * reach / g_i) would pass MAX_PRE_ACTIVATION, never below 2.
        reach = np.maximum(np.abs(xs[-1] - mids), np.abs(xs[0] - mids))
        sharpness = np.clip(MAX_PRE_ACTIVATION * gaps / reach, MIN_SHARPNESS, exactness)
        # Slopes are powers of two (rounded up: a sharper ramp only widens the exact window), so
        # slope * x is exact in float32, and centres sit on integer pre-activations, so the
        # pair's biases c +- 1/2 are exact too. For inputs on a dyadic grid (integers, halves,
        # ...) the pre-activations are then exact and a saturated ramp contributes exactly 1;
        # otherwise the pair's two units can round differently only when they straddle a power
        # of two, by one ulp of MAX_PRE_ACTIVATION at most. The centring shift of at most half a
        # ramp width keeps every value of the set outside the ramp (MIN_SHARPNESS).
        slopes = np.exp2(np.ceil(np.log2(sharpness / gaps)))
        centres = np.round(-slopes * mids)
        offsets = np.array([0.5, -0.5])
        biases = centres[:, None] + offsets[None, :]
        first[x_row, 1:] = np.repeat(slopes, 2)
        first[one_row, 1:] = biases.ravel()
    gate_bias_at_bos(first, one_row, bos_row)

    second = np.zeros((hidden.num_dims, output_space.num_dims))
    second[0] = targets[0]
    second[1::2] = deltas
    second[2::2] = -deltas
    return MLP(LinearMap(in_space, hidden, first), LinearMap(hidden, output_space, second))


def _default_hidden(output_space: VectorSpaceWithBasis, hidden_name: str | None) -> str:
    if hidden_name:
        return hidden_name
    if output_space.num_dims == 0:
        raise ValueError("output space is empty; pass hidden_name explicitly")
    return f"{output_space.basis[0].name}_hidden"


def gate_bias_at_bos(first: np.ndarray, one_row: int, bos_row: int) -> None:
    """Switch off every hidden unit with a bias at BOS (where the numerical input is 0), so the
    block writes nothing there (the BOS-zero invariant)."""
    first[bos_row, :] = -(np.abs(first[one_row, :]) + 1.0)


def map_numerical_mlp(
    f: Callable[[float], float],
    input_space: VectorSpaceWithBasis,
    output_space: VectorSpaceWithBasis,
    input_value_set: Iterable[Any],
    one_space: VectorSpaceWithBasis,
    bos_space: VectorSpaceWithBasis,
    exactness: float = 100,
    hidden_name: str | None = None,
) -> MLP:
    """Numerical -> numerical Map; exact on the value set (see module docstring for the window)."""
    check_single(output_space, "output_space")
    xs, originals = sorted_inputs(input_value_set)
    targets = target_rows(f, originals, None)
    return _discretising_mlp(
        xs, targets, input_space, output_space, one_space, bos_space, exactness,
        _default_hidden(output_space, hidden_name),
    )


def map_numerical_to_categorical_mlp(
    f: Callable[[float], Hashable],
    input_space: VectorSpaceWithBasis,
    output_space: VectorSpaceWithBasis,
    input_value_set: Iterable[Any],
    one_space: VectorSpaceWithBasis,
    bos_space: VectorSpaceWithBasis,
    exactness: float = 100,
    hidden_name: str | None = None,
) -> MLP:
    """Numerical -> categorical Map: writes the one-hot of f(x_j); None / unknown values write nothing."""
    xs, originals = sorted_inputs(input_value_set)
    name = output_space.basis[0].name if output_space.num_dims else ""
    # Only values with a direction in the output space get a one-hot; others write nothing.
    values = [d.value for d in output_space.basis if d.name == name]
    targets = target_rows(f, originals, values)
    return _discretising_mlp(
        xs, targets, input_space, output_space, one_space, bos_space, exactness,
        _default_hidden(output_space, hidden_name),
    )


def linear_sequence_map_numerical_mlp(
    input1_space: VectorSpaceWithBasis,
    input2_space: VectorSpaceWithBasis,
    output_space: VectorSpaceWithBasis,
    fst_fac: float,
    snd_fac: float,
    hidden_name: str,
) -> MLP:
    """out = fst_fac * x + snd_fac * y with four ReLUs (x = relu(x) - relu(-x)); no bias, so zero
    in gives zero out (BOS-safe). The two inputs may be the same direction."""
    check_single(input1_space, "input1_space")
    check_single(input2_space, "input2_space")
    check_single(output_space, "output_space")
    in_space = join_vector_spaces(input1_space, input2_space)
    hidden = VectorSpaceWithBasis(
        tuple(BasisDirection(hidden_name, tag) for tag in ("x+", "x-", "y+", "y-"))
    )
    first = np.zeros((in_space.num_dims, 4))
    first[in_space.index(input1_space.basis[0]), [0, 1]] += [1.0, -1.0]
    first[in_space.index(input2_space.basis[0]), [2, 3]] += [1.0, -1.0]
    second = np.array([[fst_fac], [-fst_fac], [snd_fac], [-snd_fac]], dtype=np.float64)
    return MLP(LinearMap(in_space, hidden, first), LinearMap(hidden, output_space, second))
