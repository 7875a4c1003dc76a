"""Checks of the interference bound on a model, shared by its tests: every sub-layer's measured
error within the walked intervals (tests/compression/test_bound.py explains the comparison)."""

import jax.numpy as jnp
import numpy as np

from compiler import compile_rasp
from compiler.examples import CATALOGUE
from compression.analytic.bound import walk
from compression.analytic.readers import projection
from compression.task import CompressionTask, frozen_from_compiled, input_space_of

SLACK = 1e-12


def task_of(name: str, size: int, optimize: bool = True, causal: bool = False) -> CompressionTask:
    example = CATALOGUE[name]
    program = example.build(size)
    compiled = compile_rasp(program, set(example.scaled_vocab(size)), size, optimize=optimize, causal=causal)
    return CompressionTask(name, program, compiled, frozen_from_compiled(compiled), input_space_of(compiled), causal)


def measured_errors(task: CompressionTask, w: np.ndarray, ids: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per sub-layer: the summed error ``E`` after it and the compiled stream after it, ``[N, T, D]``."""
    model = task.model
    eye = jnp.eye(model.residual_dim, dtype=jnp.float32)
    plain = model.forward(model.params, jnp.asarray(ids), projection=eye)
    squeezed = model.forward(model.params, jnp.asarray(ids), projection=jnp.asarray(w, jnp.float32))
    total = np.zeros(np.asarray(plain.residuals[0]).shape)
    errors = []
    for mine, theirs in zip(squeezed.written, plain.written):
        total = total + np.asarray(mine, np.float64) - np.asarray(theirs, np.float64)
        errors.append(total.copy())
    return errors, [np.asarray(r, np.float64) for r in plain.residuals[1:]]


def assert_within(task: CompressionTask, structure, w: np.ndarray, ids: np.ndarray) -> None:
    """Every measured ``E`` within the walked intervals (module docstring)."""
    view = structure.view
    found = walk(view, projection(view, w), structure.classes, frozenset(structure.merger_layers))
    after = [*found.before[1:], found.errors]
    errors, streams = measured_errors(task, w, ids)
    real = np.asarray(ids) != task.model.pad_id
    categorical = view.categorical
    for index, (measured, bound, stream) in enumerate(zip(errors, after, streams)):
        value, got = stream[real], measured[real]
        on = (value > 0.5) & categorical
        # a value of 0 scales nothing, even an unbounded scale (0 * inf would be nan: no check at all)
        with np.errstate(invalid="ignore"):
            low, high = (np.where(value == 0, 0.0, value * scale) for scale in (bound.scale_lo, bound.scale_hi))
        lo = np.where(on, bound.on_lo, bound.off_lo) + np.minimum(low, high)
        hi = np.where(on, bound.on_hi, bound.off_hi) + np.maximum(low, high)
        # where alike values share a direction the bound's reference writes a value on up to its
        # class size times (the amplification), which the compiled model writes once
        hi = hi + np.where(on, (view.amplification - 1.0) * value, 0.0)
        below, above = got < lo - SLACK, got > hi + SLACK
        assert not below.any() and not above.any(), (
            task.name, index, [structure.labels[i] for i in np.nonzero((below | above).any(axis=0))[0]],
            float(np.max(np.maximum(lo - got, got - hi))))
