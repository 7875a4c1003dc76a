"""Feature spaces: boolean features stored (possibly in superposition) in a labelled space.

A :class:`FeatureSpace` is a physical space of ``d`` labelled directions
(``BasisDirection(name, 0..d-1)``, or one direction per label when basis-aligned) together with,
for every feature label, a *write vector* (what the producer adds to the residual when the feature
is on) and a *read covector* (what a consumer dots with the residual to recover it). For random
unit features the two coincide; for basis-aligned features both are the identity. Many features
can share the physical space; the price is interference, summarised by :meth:`coherence` and
:meth:`interference_budget`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from constructions.superposition.seeding import Seed, as_generator, recorded_seed


@dataclass(frozen=True)
class CoherenceStats:
    """Largest and root-mean-square |f_i . f_j| over distinct features (read vs write)."""

    max_abs: float
    rms: float


@dataclass(frozen=True)
class InterferenceBudget:
    """What a consumer of this space should expect when ``active`` features are on at once."""

    n_features: int
    n_dims: int
    active: int
    coherence_max: float
    coherence_rms: float
    read_noise_rms: float  # rms of an off feature's read: sqrt(active) * coherence_rms
    worst_read_noise: float  # active * coherence_max (deterministic bound)


@dataclass(frozen=True, eq=False)
class FeatureSpace:
    """Labelled boolean features with write vectors and read covectors in a physical space.

    ``write`` and ``read`` have shape ``(n_features, n_dims)``; row ``i`` belongs to
    ``labels[i]``. ``values`` are the ``value`` parts of the physical directions, all under
    ``name``.
    """

    name: str
    labels: tuple[Hashable, ...]
    write: np.ndarray
    read: np.ndarray
    values: tuple[Hashable, ...]
    basis_aligned: bool = False
    seed: int | None = None
    _index: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        m, d = len(self.labels), len(self.values)
        for arr, what in ((self.write, "write"), (self.read, "read")):
            if arr.shape != (m, d):
                raise ValueError(f"{what} vectors of '{self.name}' have shape {arr.shape}, "
                                 f"expected ({m}, {d}) = (labels, physical dims)")
        if len(set(self.labels)) != m:
            raise ValueError(f"feature labels of '{self.name}' are not unique")
        self._index.update({label: i for i, label in enumerate(self.labels)})

    @property
    def n_features(self) -> int:
        return len(self.labels)

    @property
    def n_dims(self) -> int:
        return len(self.values)

    def index(self, label: Hashable) -> int:
        """Row of ``label`` in ``write`` / ``read``."""
        return self._index[label]

    def embed(self, active: np.ndarray) -> np.ndarray:
        """Physical vectors for boolean inputs given as active feature indices ``(n, s)``."""
        active = np.asarray(active)
        if active.ndim == 1:
            active = active[None, :]
        if self.basis_aligned:
            x = np.zeros((active.shape[0], self.n_dims), dtype=self.write.dtype)
            np.put_along_axis(x, active, 1.0, axis=1)
            return x
        return self.write[active].sum(axis=1)

    def read_all(self, x: np.ndarray) -> np.ndarray:
        """Every feature's read-out of physical vectors ``x`` (``(n, n_features)``)."""
        return np.asarray(x) @ self.read.T

    def coherence(self, chunk: int = 2048) -> CoherenceStats:
        """max and rms of ``|read_i . write_j|`` over ``i != j`` (chunked to bound memory)."""
        if self.basis_aligned:
            return CoherenceStats(0.0, 0.0)
        m = self.n_features
        mx, sq = 0.0, 0.0
        for start in range(0, m, chunk):
            block = self.read[start:start + chunk].astype(np.float64) @ self.write.T.astype(np.float64)
            rows = np.arange(block.shape[0])
            block[rows, start + rows] = 0.0
            mx = max(mx, float(np.abs(block).max()))
            sq += float(np.sum(block**2))
        return CoherenceStats(mx, float(np.sqrt(sq / max(m * (m - 1), 1))))

    def interference_budget(self, active: int) -> InterferenceBudget:
        """Interference an off feature sees when ``active`` features are on."""
        coh = self.coherence()
        return InterferenceBudget(self.n_features, self.n_dims, active, coh.max_abs, coh.rms,
                                  float(np.sqrt(active) * coh.rms), float(active * coh.max_abs))

    @cached_property
    def space(self):
        """The physical directions as a Craft ``VectorSpaceWithBasis``."""
        from craft import bases

        return bases.VectorSpaceWithBasis([bases.BasisDirection(self.name, v) for v in self.values])


def basis_features(name: str, labels: Sequence[Hashable], dtype=np.float32) -> FeatureSpace:
    """Features on their own basis directions ``BasisDirection(name, label)`` (no superposition)."""
    labels = tuple(labels)
    eye = np.eye(len(labels), dtype=dtype)
    return FeatureSpace(name, labels, eye, eye, labels, basis_aligned=True)


def random_unit_features(name: str, n_features: int, n_dims: int, seed: Seed,
                         labels: Sequence[Hashable] | None = None,
                         dtype=np.float32) -> FeatureSpace:
    """``n_features`` random unit vectors in ``n_dims`` dimensions (read = write).

    Directions are isotropic Gaussian draws normalised to length 1, so pairwise overlaps are about
    ``N(0, 1/n_dims)``; more features than dimensions is the point.
    """
    rng = as_generator(seed)
    f = rng.standard_normal((n_features, n_dims))
    f /= np.linalg.norm(f, axis=1, keepdims=True)
    f = f.astype(dtype)
    labels = tuple(range(n_features)) if labels is None else tuple(labels)
    return FeatureSpace(name, labels, f, f, tuple(range(n_dims)), seed=recorded_seed(seed))


def boolean_matrix(active: np.ndarray, n_features: int) -> np.ndarray:
    """``(n, n_features)`` 0/1 indicator of active feature indices ``(n, s)``."""
    active = np.asarray(active)
    x = np.zeros((active.shape[0], n_features), dtype=bool)
    np.put_along_axis(x, active, True, axis=1)
    return x


def sample_active_sets(rng: np.random.Generator, n: int, s: int, n_features: int,
                       exclude: np.ndarray | None = None) -> np.ndarray:
    """``(n, s)`` random active sets of ``s`` distinct features, optionally avoiding ``exclude``.

    ``exclude`` (``(n, e)``) lists per-row features that must not be drawn.
    """
    from constructions.superposition.seeding import sample_distinct

    if exclude is None:
        return sample_distinct(rng, n, s, n_features)
    exclude = np.asarray(exclude)
    out = sample_distinct(rng, n, s, n_features)
    while True:
        clash = (out[:, :, None] == exclude[:, None, :]).any(axis=(1, 2))
        if not clash.any():
            return out
        out[clash] = sample_distinct(rng, int(clash.sum()), s, n_features)
