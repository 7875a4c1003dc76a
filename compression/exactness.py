"""Is a compressed model exact? Its outputs against RASP on every input, or on a large sample.

An :class:`ExactnessCheck` fixes the inputs (all of them when the space has at most
``enumerate_limit``, else ``samples`` random ones, at least 2,000) and their RASP references once;
:meth:`ExactnessCheck.check` then costs one batched forward pass. Numerical outputs count as right
within half the smallest gap between reference values (they decode to the right value).
"""

from __future__ import annotations

import dataclasses
import functools

import jax.numpy as jnp
import numpy as np

from compiler.errors import CompressionError
from compression.analytic.bound import interference_bound
from compression.analytic.packing import AnalyticReport, Method, make_projection
from compression.analytic.structure import ResidualStructure, residual_structure
from compression.evaluation import ReferenceSet, accuracy, nearest_value_tolerance, sequences_right
from compression.learned.sampling import distinct_inputs, enumerate_inputs
from compression.task import CompressionTask

MIN_SAMPLES = 2_000


@dataclasses.dataclass(frozen=True, eq=False)
class ExactnessCheck:
    """Fixed evaluation inputs of one task with their references."""

    task: CompressionTask
    refs: ReferenceSet
    enumerated: bool
    atol: float

    @property
    def size(self) -> int:
        return len(self.refs.ids)

    def sequence_accuracy(self, projection: np.ndarray | None) -> float:
        """Fraction of inputs whose every scored position equals RASP (one compiled forward
        pass for every width, see :func:`~compression.evaluation.accuracy`)."""
        return accuracy(self.task.model, projection, self.refs, atol=self.atol).sequence

    def is_exact(self, projection: np.ndarray | None) -> bool:
        """Whether every input's every scored position equals RASP under ``projection``."""
        return self.sequence_accuracy(projection) == 1.0

    def wrong_inputs(self, projection: np.ndarray | None, shared_shape: bool = True) -> np.ndarray:
        """Indices (into ``refs.ids``) of the inputs with a scored position that differs from RASP
        under ``projection`` (empty: exact); ``shared_shape``: see
        :func:`~compression.evaluation.sequences_right`."""
        return np.nonzero(~sequences_right(self.task.model, projection, self.refs, atol=self.atol,
                                           shared_shape=shared_shape))[0]

    @functools.cached_property
    def compiled_residuals(self) -> tuple[np.ndarray, ...]:
        """The uncompressed model's residual snapshots on the check's inputs (computed once)."""
        model = self.task.model
        return tuple(np.asarray(r) for r in model.forward(model.params, jnp.asarray(self.refs.ids)).residuals)


def exactness_check(task: CompressionTask, enumerate_limit: int = 5_000, samples: int = MIN_SAMPLES,
                    seed: int = 0) -> ExactnessCheck:
    """Every input of ``task`` when there are at most ``enumerate_limit``, else ``samples`` drawn."""
    if samples < MIN_SAMPLES:
        raise CompressionError(f"samples={samples}: exactness needs at least {MIN_SAMPLES} sampled inputs")
    enumerated = task.space.size() <= enumerate_limit
    if enumerated:
        ids = enumerate_inputs(task.space)
    else:
        ids = distinct_inputs(task.space, samples, seed)
    refs = task.reference_set(ids)
    atol = nearest_value_tolerance(refs) if refs.kind == "numerical" else 0.0
    return ExactnessCheck(task, refs, enumerated, atol)


def never_on(check: ExactnessCheck, atol: float = 1e-6) -> tuple[int, ...]:
    """Residual coordinates of the compiled model that are 0 (within ``atol``) at every non-PAD
    position of every input of ``check``, in every residual snapshot.

    When ``check.enumerated`` this is a fact about the whole input space (values the program can
    never produce, e.g. pairs of a SequenceMap over two views of one token), and
    ``residual_structure(compiled, never_on=...)`` may zero them; on sampled inputs it is only an
    observation.
    """
    real = np.asarray(check.refs.ids) != check.task.model.pad_id
    active = np.zeros(check.task.model.residual_dim, bool)
    for snapshot in check.compiled_residuals:
        active |= np.any(np.abs(snapshot[real]) > atol, axis=0)
    return tuple(int(i) for i in np.nonzero(~active)[0])


def analytic_projection(
    task: CompressionTask, method: Method, d: int, seed: int = 0, check: ExactnessCheck | None = None,
    structure: ResidualStructure | None = None,
) -> tuple[np.ndarray, AnalyticReport]:
    """The ``method`` projection of ``task``'s model at width ``d`` and its report.

    The report holds the interference bound, whether it claims exactness, and (when ``check`` is
    given) whether the compressed model equals RASP on the check's inputs.
    """
    structure = structure or residual_structure(task.compiled)
    w = make_projection(structure, method, d, seed)
    bound = interference_bound(structure, w)
    report = AnalyticReport(method, structure.residual_dim, d, len(structure.protected), bound, bound.claims_exact)
    if check is not None:
        acc = check.sequence_accuracy(w)
        report = dataclasses.replace(report, measured_exact=acc == 1.0, sequence_accuracy=acc,
                                     inputs_checked=check.size, inputs_enumerated=check.enumerated)
    return w, report
