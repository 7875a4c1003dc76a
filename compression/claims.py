"""Claims of exactness, each with the check that confirms it on the model: no "exact" without one.

A compressed model is published as exact only when two things hold: the interference bound
(:mod:`compression.analytic.bound`) proves it for every input, and a check on the model itself
finds no input it gets wrong. The check runs every input when the input space holds at most
:data:`ENUMERATE_LIMIT`; else a stated number of distinct random inputs plus the inputs on which
the bound's tightest margins are spent (inputs whose compiled output puts on, at some position,
the output value whose margin is most used; or where it is None, when that is the tightest). The
check scores every position the way the model's decoder reads it, None outputs included, and a
number within the agree rule's tolerance (:func:`check_tolerance`).

:func:`claim_exactness` returns a :class:`Claim`, which holds the bound's verdict, the check
(its kind, size and result) and the status that follows (:func:`project` builds an analytic
projection and returns it with its bound and claim, the one way from a model to a published W):

* ``exact``: the bound claims exactness and the check finds no wrong input;
* ``not claimed``: the bound does not claim it (the check says how the model fares anyway);
* ``wrong claim``: the bound claims exactness and the check finds a wrong input, a defect of the
  bound; such a claim is never published as exact.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax.numpy as jnp
import numpy as np

from compiler.enums import StrEnum
from compiler.model.agree import AGREE_TOLERANCE
from compression.analytic.bound import InterferenceBound, interference_bound
from compression.analytic.packing import Method, make_projection, packed_width
from compression.analytic.structure import ResidualStructure, residual_structure
from compression.evaluation import ReferenceSet, nearest_value_tolerance
from compression.exactness import ExactnessCheck
from compression.learned.sampling import distinct_inputs, enumerate_inputs
from compression.task import CompressionTask

# Input spaces up to this size are checked on every input.
ENUMERATE_LIMIT = 100_000
# Distinct random inputs a sampled check runs, and at most as many more the bound names tightest.
SAMPLES = 2_000
# Random inputs searched for ones on which the tightest margins are spent.
TIGHTEST_POOL = 20_000
# Pool inputs run through the compiled model at once (the search stops once enough are found).
POOL_CHUNK = 4_000



class ClaimStatus(StrEnum):
    """What a claim says of a projection: exact (the bound proves it and the check found no
    wrong input), not claimed (the bound cannot prove it), or a wrong claim (the bound claimed it
    and the check found a wrong input: never published as exact)."""

    EXACT = "exact"
    NOT_CLAIMED = "not claimed"
    WRONG_CLAIM = "wrong claim"


EXACT, NOT_CLAIMED, WRONG_CLAIM = ClaimStatus


@dataclasses.dataclass(frozen=True)
class Check:
    """A check of a model against RASP: which inputs (``exhaustive``: all of the ``space``;
    ``sampled``: ``inputs`` distinct ones, ``tightest`` of them chosen by the bound, the rest
    random with ``seed``) and how many it got wrong."""

    kind: str  # "exhaustive" | "sampled"
    inputs: int  # inputs checked (those outside the program's domain, which RASP rejects, left out)
    space: int
    wrong: int
    tightest: int = 0
    seed: int | None = None

    @property
    def passed(self) -> bool:
        return self.wrong == 0

    def describe(self) -> str:
        """One line: what was checked and what it found."""
        where = (f"all {self.inputs:,} inputs" if self.kind == "exhaustive" else
                 f"{self.inputs:,} of {self.space:,} inputs ({self.tightest:,} where the bound's margin is "
                 f"tightest, the rest drawn with seed {self.seed})")
        return f"{'right' if self.passed else f'wrong on {self.wrong:,}'} of {where}"


@dataclasses.dataclass(frozen=True)
class Claim:
    """A projection's exactness claim with its check (module docstring)."""

    residual_dim: int
    d: int
    bound_claims: bool  # the interference bound proves exactness on every input
    max_load: float  # the bound's output load (below 1 when it claims)
    check: Check

    @property
    def exact(self) -> bool:
        """Published as exact: the bound proves it and the check confirms it."""
        return self.bound_claims and self.check.passed

    @property
    def status(self) -> str:
        if not self.bound_claims:
            return NOT_CLAIMED
        return EXACT if self.check.passed else WRONG_CLAIM

    def to_json(self) -> dict[str, Any]:
        """The claim as JSON data (the check as a nested object)."""
        return {"residual_dim": self.residual_dim, "d": self.d, "status": self.status, "exact": self.exact,
                "bound_claims_exact": self.bound_claims, "bound_load": _finite(self.max_load),
                "check": dataclasses.asdict(self.check) | {"description": self.check.describe()}}


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def check_tolerance(check: ExactnessCheck) -> float:
    """How far a numerical output may be from RASP's: the agree rule's tolerance, or less where
    output values are closer than that (then half their smallest gap, so it decodes to the right one)."""
    return min(AGREE_TOLERANCE, nearest_value_tolerance(check.refs)) if check.refs.kind == "numerical" else 0.0


def _checked(task: CompressionTask, ids: np.ndarray, enumerated: bool) -> ExactnessCheck:
    refs = task.reference_set(ids)
    check = ExactnessCheck(task, refs, enumerated, 0.0)
    return dataclasses.replace(check, atol=check_tolerance(check))


def _joined(check: ExactnessCheck, more: ReferenceSet) -> ExactnessCheck:
    """``check`` with the inputs of ``more`` appended (the tolerance recomputed over both)."""
    refs = check.refs

    def none(r: ReferenceSet) -> np.ndarray:
        return r.none if r.none is not None else np.zeros(r.mask.shape, np.float32)

    def defined(r: ReferenceSet) -> np.ndarray:
        return r.defined if r.defined is not None else np.ones(len(r.ids), bool)

    joined = ReferenceSet(np.concatenate([refs.ids, more.ids]), np.concatenate([refs.targets, more.targets]),
                          np.concatenate([refs.mask, more.mask]), refs.kind, np.concatenate([none(refs), none(more)]),
                          np.concatenate([defined(refs), defined(more)]), refs.classes)
    grown = ExactnessCheck(check.task, joined, check.enumerated, 0.0)
    return dataclasses.replace(grown, atol=check_tolerance(grown))


@dataclasses.dataclass(frozen=True, eq=False)
class ClaimInputs:
    """The inputs every claim on one task is checked on, prepared once (module docstring).

    ``base`` holds every input (``kind`` "exhaustive") or ``samples`` distinct random ones drawn
    with ``seed`` ("sampled"), with their RASP references. For a sampled check each bound adds
    the inputs on which its tightest margins are spent, found in a pool of random inputs whose
    compiled outputs are computed once here (:attr:`pool_best`). Claims at several widths of one
    model share one ``ClaimInputs`` (:func:`claim_inputs`), so the references and the compiled
    model's pass over the pool are not computed again per width.
    """

    task: CompressionTask
    base: ExactnessCheck
    kind: str  # "exhaustive" | "sampled"
    samples: int
    seed: int

    @functools.cached_property
    def pool(self) -> np.ndarray:
        """``[P, T]``: the distinct random inputs searched for the bound's tightest ones."""
        return distinct_inputs(self.task.space, TIGHTEST_POOL, self.seed + 1)

    def pool_best(self, rows: int) -> np.ndarray:
        """``[n, T]`` for the first ``n >= min(rows, P)`` pool inputs (whole chunks of
        :data:`POOL_CHUNK`, computed once each): per real position, the index of the compiled
        model's largest output logit (-1 elsewhere); a numerical output: 0 at every real position."""
        model, pool = self.task.model, self.pool
        while len(self._best) * POOL_CHUNK < min(rows, len(pool)):
            chunk = pool[len(self._best) * POOL_CHUNK:][:POOL_CHUNK]
            out = np.asarray(model.forward(model.params, jnp.asarray(chunk), outputs_only=True).output)
            real = chunk != model.pad_id
            real[:, 0] = False
            best = np.zeros(chunk.shape, np.int64) if out.ndim == 2 else out.argmax(-1)
            self._best.append(np.where(real, best, -1))
        return np.concatenate(self._best) if self._best else np.zeros((0, self.task.space.width), np.int64)

    @functools.cached_property
    def _best(self) -> list[np.ndarray]:
        """The chunks of :meth:`pool_best` computed so far."""
        return []

    def tightest(self, bound: InterferenceBound, count: int) -> np.ndarray:
        """The first ``count`` pool inputs (or fewer) on which the compiled model outputs, at
        some real position, a value whose logit ``bound`` names tightest (``bound.tightest``), or
        None when the tightest is a categorical logit's margin against the empty threshold
        (every real position of a numerical output reads the tightest number). The pool's
        compiled outputs are computed chunk by chunk, only as far as needed."""
        if not bound.tightest:
            return np.zeros((0, self.task.space.width), np.int32)
        numerical = self.task.model.output_kind == "numerical"
        scanned = 0
        while True:
            best = self.pool_best(scanned + POOL_CHUNK)
            hits = np.any(best >= 0, axis=1) if numerical else np.any((best >= 0) & np.isin(best, bound.tightest), 1)
            if hits.sum() >= count or len(best) >= len(self.pool):
                return self.pool[: len(best)][hits][:count]
            scanned = len(best)

    def check_for(self, bound: InterferenceBound | None) -> tuple[ExactnessCheck, str, int]:
        """The check of a claim whose bound is ``bound``, as ``(check, kind, tightest)``: the
        base inputs, plus (sampled, with a bound) the tightest inputs not already among them."""
        if self.kind == "exhaustive" or bound is None:
            return self.base, self.kind, 0
        base_ids = self.base.refs.ids
        extra = self.tightest(bound, self.samples)
        if len(extra):
            extra = extra[~(extra[:, None, :] == base_ids[None, :, :]).all(-1).any(-1)]
        if not len(extra):
            return self.base, self.kind, 0
        return _joined(self.base, self.task.reference_set(extra)), self.kind, len(extra)


def claim_inputs(task: CompressionTask, samples: int = SAMPLES, seed: int = 0) -> ClaimInputs:
    """The :class:`ClaimInputs` of ``task``: every input when there are at most
    :data:`ENUMERATE_LIMIT`, else ``samples`` distinct random ones drawn with ``seed``."""
    if task.space.size() <= ENUMERATE_LIMIT:
        return ClaimInputs(task, _checked(task, enumerate_inputs(task.space), True), "exhaustive", samples, seed)
    return ClaimInputs(task, _checked(task, distinct_inputs(task.space, samples, seed), False), "sampled", samples,
                       seed)


def tightest_inputs(task: CompressionTask, bound: InterferenceBound, count: int, seed: int) -> np.ndarray:
    """Up to ``count`` distinct random inputs on which the compiled model outputs, at some real
    position, a value whose logit the bound names tightest (:meth:`ClaimInputs.tightest`)."""
    return claim_inputs(task, count, seed).tightest(bound, count)


def claim_check(task: CompressionTask, bound: InterferenceBound | None = None, samples: int = SAMPLES,
                seed: int = 0, inputs: ClaimInputs | None = None) -> tuple[ExactnessCheck, str, int]:
    """The inputs a claim is checked on (module docstring), as ``(check, kind, tightest)``: every
    input when there are at most :data:`ENUMERATE_LIMIT`, else ``samples`` distinct random ones
    plus up to as many that the ``bound`` names tightest (none without a bound). ``inputs``:
    the task's prepared :class:`ClaimInputs` (of the same ``samples`` and ``seed``), shared by
    the claims of several widths."""
    return (inputs or claim_inputs(task, samples, seed)).check_for(bound)


def claim_exactness(task: CompressionTask, w: np.ndarray, structure: ResidualStructure | None = None,
                    samples: int = SAMPLES, seed: int = 0, bound: InterferenceBound | None = None,
                    shared_shape: bool = False, inputs: ClaimInputs | None = None) -> Claim:
    """The claim that ``task``'s model compressed by ``w`` is exact, with its check.

    Args:
      task: the compiled program, its input space and its RASP references.
      w: the projection ``[D, d]``.
      structure: the model's residual structure (computed when None).
      samples: random inputs of a sampled check (when the space holds more than
        :data:`ENUMERATE_LIMIT`), plus up to as many the bound names tightest.
      seed: seed of the random inputs.
      bound: the bound of ``w`` if already computed.
      shared_shape: run the check with ``w`` padded to ``[D, D]``, the shape every width of one
        model shares, so claims at several widths compile the check once (the claims fuzz); the
        default runs ``w`` at its own width, cheaper for a single claim on a wide model.
      inputs: the task's :class:`ClaimInputs` (:func:`claim_inputs` with the same ``samples``
        and ``seed``), when claims at several widths share them.
    Returns:
      The :class:`Claim`.
    Raises:
      CompressionError: ``w`` does not have one row per residual coordinate.
    """
    structure = structure or residual_structure(task.compiled)
    bound = bound or interference_bound(structure, w)
    space = task.space.size()
    check, kind, tightest = claim_check(task, bound, samples, seed, inputs)
    wrong = int(len(check.wrong_inputs(w, shared_shape=shared_shape)))
    record = Check(kind, check.refs.checked, space, wrong, tightest, None if kind == "exhaustive" else seed)
    return Claim(structure.residual_dim, int(np.asarray(w).shape[1]), bound.claims_exact, bound.max_load, record)


@dataclasses.dataclass(frozen=True, eq=False)
class Projected:
    """An analytic projection of a task's model with what is known of it: the construction, its
    interference bound and its checked claim."""

    method: str  # "packed" | "random"
    w: np.ndarray  # [D, d]
    structure: ResidualStructure
    bound: InterferenceBound
    claim: Claim

    @property
    def d(self) -> int:
        return int(self.w.shape[1])


def project(task: CompressionTask, method: Method = "packed", width: int | None = None, seed: int = 0,
            samples: int = SAMPLES, structure: ResidualStructure | None = None, shared_shape: bool = False) -> Projected:
    """The `method` projection of `task`'s model at `width`, with its bound and checked claim.

    Args:
      task: the compiled program with its input space (`compression.task.task_of` wraps a model).
      method: "packed" (codes per s-op) or "random".
      width: d; None for the packed construction's full-margin width (where its bound is meant
        to hold), at most D.
      seed: seed of the codes (or the random W) and of the check's random inputs.
      samples: random inputs of a sampled check (`claim_exactness`).
      structure: the model's residual structure, when already computed (or adjusted).
      shared_shape: as in `claim_exactness`.
    Returns:
      The :class:`Projected` record.
    Raises:
      CompressionError: an unknown method, or a width the construction cannot fill.
    """
    structure = structure or residual_structure(task.compiled)
    d = min(packed_width(structure, seed), structure.residual_dim) if width is None else width
    w = make_projection(structure, method, d, seed)
    bound = interference_bound(structure, w)
    claim = claim_exactness(task, w, structure, samples, seed, bound, shared_shape)
    return Projected(method, w, structure, bound, claim)
