"""Labelled bases: directions, vector spaces and vectors expressed in them.

Every residual dimension of a compiled model is a `BasisDirection`, so a weight matrix can always
be read as "from these named directions to those". Directions have a total, deterministic order
(independent of hashing and of the process), which is what makes compiled weights reproducible.

Order policy: a `VectorSpaceWithBasis` keeps its basis in the order it was given (hidden spaces
and the two halves of a bilinear MLP rely on that). The constructors that *build* a space from a
collection — `from_names`, `from_values`, `join_vector_spaces` — sort it, so labels coming out of
the compiler are sorted and stable. `direct_sum` concatenates in argument order.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

# Type ranks used to order values of different types deterministically.
_RANK_NONE, _RANK_NUMBER, _RANK_STR, _RANK_TUPLE, _RANK_SET, _RANK_OTHER = range(6)


def value_sort_key(value: Any) -> tuple:
    """A key that totally orders values of mixed types: None < numbers < str < tuple < set < other.

    The key is consistent with Python equality (which the directions' hashing uses): bools are
    numbers (`True == 1`), ints and floats compare by value (NaN last among numbers), tuples
    element-wise, frozensets by their sorted elements; any other object by (type name, repr).
    """
    if value is None:
        return (_RANK_NONE,)
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    if isinstance(value, numbers.Real):
        as_float = float(value)
        if math.isnan(as_float):
            return (_RANK_NUMBER, 1, 0.0, 0)
        # Integral values keep their exact order beyond float precision via the last component.
        if isinstance(value, numbers.Integral):
            exact = int(value)
        else:
            exact = int(as_float) if as_float.is_integer() else 0
        return (_RANK_NUMBER, 0, as_float, exact)
    if isinstance(value, str):
        return (_RANK_STR, value)
    if isinstance(value, tuple):
        return (_RANK_TUPLE, tuple(value_sort_key(v) for v in value))
    if isinstance(value, frozenset):
        return (_RANK_SET, tuple(sorted(value_sort_key(v) for v in value)))
    return (_RANK_OTHER, type(value).__name__, repr(value))


@dataclasses.dataclass(frozen=True)
class BasisDirection:
    """One named axis of a vector space; `value` distinguishes the one-hot axes of a categorical s-op."""

    name: str
    value: Hashable | None = None

    def sort_key(self) -> tuple:
        """Deterministic total-order key: (name, value key)."""
        return (self.name, value_sort_key(self.value))

    def __lt__(self, other: BasisDirection) -> bool:
        if not isinstance(other, BasisDirection):
            return NotImplemented
        return self.sort_key() < other.sort_key()

    def __le__(self, other: BasisDirection) -> bool:
        if not isinstance(other, BasisDirection):
            return NotImplemented
        return self == other or self.sort_key() < other.sort_key()

    def __gt__(self, other: BasisDirection) -> bool:
        if not isinstance(other, BasisDirection):
            return NotImplemented
        return other < self

    def __ge__(self, other: BasisDirection) -> bool:
        if not isinstance(other, BasisDirection):
            return NotImplemented
        return other <= self

    def __str__(self) -> str:
        return self.name if self.value is None else f"{self.name}:{self.value}"


def sort_directions(directions: Iterable[BasisDirection]) -> tuple[BasisDirection, ...]:
    """Sort directions by their deterministic key (duplicates are kept)."""
    return tuple(sorted(directions, key=BasisDirection.sort_key))


# The residual stream's reserved directions, defined here once for the compiler, the
# constructions and compression. `one` is 1 at every position (it carries MLP biases);
# the tokens embedding writes `tokens:<token>`, and BOS is the token at position 0.
ONE_NAME = "one"
TOKENS_NAME = "tokens"
INDICES_NAME = "indices"
ONE = BasisDirection(ONE_NAME)


def bos_direction(bos: Hashable = "BOS") -> BasisDirection:
    """The `tokens:<bos>` direction, set at position 0 of every sequence."""
    return BasisDirection(TOKENS_NAME, bos)


@dataclasses.dataclass(frozen=True)
class VectorSpaceWithBasis:
    """A vector space spanned by an ordered tuple of distinct, labelled directions."""

    basis: tuple[BasisDirection, ...]
    _index: Mapping[BasisDirection, int] = dataclasses.field(
        init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        basis = tuple(self.basis)
        for direction in basis:
            if not isinstance(direction, BasisDirection):
                raise TypeError(f"basis entries must be BasisDirection, got {direction!r}")
        index = {direction: i for i, direction in enumerate(basis)}
        if len(index) != len(basis):
            seen: set[BasisDirection] = set()
            dups = []  # every occurrence after a direction's first
            for d in basis:
                if d in seen:
                    dups.append(str(d))
                seen.add(d)
            raise ValueError(f"basis has repeated directions: {dups[:5]}")
        object.__setattr__(self, "basis", basis)
        object.__setattr__(self, "_index", index)

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_names(cls, names: Iterable[str]) -> VectorSpaceWithBasis:
        """Space of valueless directions, one per name, sorted."""
        return cls(sort_directions(BasisDirection(n) for n in set(names)))

    @classmethod
    def from_values(cls, name: str, values: Iterable[Hashable]) -> VectorSpaceWithBasis:
        """One-hot space of a categorical variable: directions (name, v), sorted by value."""
        return cls(sort_directions({BasisDirection(name, v) for v in values}))

    # -- queries --------------------------------------------------------------------------------
    @property
    def num_dims(self) -> int:
        return len(self.basis)

    def __len__(self) -> int:
        return len(self.basis)

    def __iter__(self):
        return iter(self.basis)

    def __contains__(self, item: object) -> bool:
        if isinstance(item, BasisDirection):
            return item in self._index
        if isinstance(item, VectorSpaceWithBasis):
            return self.issuperspace(item)
        return False

    def index(self, direction: BasisDirection) -> int:
        """Position of `direction` in the basis (O(1)); KeyError naming it when absent."""
        try:
            return self._index[direction]
        except KeyError:
            raise KeyError(f"direction {direction} is not in this space") from None

    def indices(self, directions: Iterable[BasisDirection]) -> np.ndarray:
        """Positions of several directions, as an int array."""
        return np.fromiter((self.index(d) for d in directions), dtype=np.int64)

    def issubspace(self, other: VectorSpaceWithBasis) -> bool:
        """True when every direction of self is in `other`."""
        return all(d in other._index for d in self.basis)

    def issuperspace(self, other: VectorSpaceWithBasis) -> bool:
        return other.issubspace(self)

    def same_directions(self, other: VectorSpaceWithBasis) -> bool:
        """Equal as sets of directions (order ignored)."""
        return self.num_dims == other.num_dims and self.issubspace(other)

    def sorted(self) -> VectorSpaceWithBasis:
        return VectorSpaceWithBasis(sort_directions(self.basis))

    # -- vectors --------------------------------------------------------------------------------
    def null_vector(self, batch_shape: tuple[int, ...] = ()) -> VectorInBasis:
        return VectorInBasis(self.basis, np.zeros(batch_shape + (self.num_dims,)))

    def vector_from_basis_direction(self, direction: BasisDirection) -> VectorInBasis:
        magnitudes = np.zeros(self.num_dims)
        magnitudes[self.index(direction)] = 1.0
        return VectorInBasis(self.basis, magnitudes)

    def vector_from_dict(self, magnitudes: Mapping[BasisDirection, float]) -> VectorInBasis:
        """Vector with the given magnitudes on the given directions, zero elsewhere."""
        out = np.zeros(self.num_dims)
        for direction, magnitude in magnitudes.items():
            out[self.index(direction)] = magnitude
        return VectorInBasis(self.basis, out)

    def basis_vectors(self) -> list[VectorInBasis]:
        eye = np.eye(self.num_dims)
        return [VectorInBasis(self.basis, eye[i]) for i in range(self.num_dims)]

    def __str__(self) -> str:
        return "{" + ", ".join(str(d) for d in self.basis) + "}"


def direct_sum(*spaces: VectorSpaceWithBasis) -> VectorSpaceWithBasis:
    """Concatenate bases in argument order; raises ValueError when two spaces share a direction."""
    basis: list[BasisDirection] = []
    seen: set[BasisDirection] = set()
    for space in spaces:
        overlap = [str(d) for d in space.basis if d in seen]
        if overlap:
            raise ValueError(f"direct_sum: spaces overlap on {overlap[:5]}")
        seen.update(space.basis)
        basis.extend(space.basis)
    return VectorSpaceWithBasis(tuple(basis))


def join_vector_spaces(*spaces: VectorSpaceWithBasis) -> VectorSpaceWithBasis:
    """Union of the spaces' directions, sorted (overlap allowed)."""
    union: set[BasisDirection] = set()
    for space in spaces:
        union.update(space.basis)
    return VectorSpaceWithBasis(sort_directions(union))


@dataclasses.dataclass(frozen=True, eq=False)
class VectorInBasis:
    """Magnitudes over a labelled basis; the last axis indexes `basis_directions`.

    Leading axes are batch axes (for blocks: `(..., positions, dims)`).
    """

    basis_directions: tuple[BasisDirection, ...]
    magnitudes: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "basis_directions", tuple(self.basis_directions))
        magnitudes = np.asarray(self.magnitudes)
        if magnitudes.dtype.kind not in "fc":
            magnitudes = magnitudes.astype(np.float64)
        if magnitudes.ndim == 0 or magnitudes.shape[-1] != len(self.basis_directions):
            raise ValueError(
                f"magnitudes last axis {magnitudes.shape} does not match "
                f"{len(self.basis_directions)} basis directions"
            )
        object.__setattr__(self, "magnitudes", magnitudes)

    @property
    def space(self) -> VectorSpaceWithBasis:
        return VectorSpaceWithBasis(self.basis_directions)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.magnitudes.shape

    def _aligned(self, other: VectorInBasis) -> np.ndarray:
        """`other`'s magnitudes reordered to self's basis (same direction set required)."""
        if other.basis_directions == self.basis_directions:
            return other.magnitudes
        if set(other.basis_directions) != set(self.basis_directions):
            raise ValueError("vectors live in different spaces; project them first")
        return other.project(self.space).magnitudes

    def __add__(self, other: VectorInBasis) -> VectorInBasis:
        return VectorInBasis(self.basis_directions, self.magnitudes + self._aligned(other))

    def __sub__(self, other: VectorInBasis) -> VectorInBasis:
        return VectorInBasis(self.basis_directions, self.magnitudes - self._aligned(other))

    def __mul__(self, scalar: float) -> VectorInBasis:
        if isinstance(scalar, VectorInBasis):
            raise TypeError("only scalar multiplication is defined")
        return VectorInBasis(self.basis_directions, self.magnitudes * scalar)

    __rmul__ = __mul__

    def __neg__(self) -> VectorInBasis:
        return VectorInBasis(self.basis_directions, -self.magnitudes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, VectorInBasis):
            return NotImplemented
        return set(self.basis_directions) == set(other.basis_directions) and bool(
            np.array_equal(self.magnitudes, self._aligned(other))
        )

    __hash__ = None  # type: ignore[assignment]

    def allclose(self, other: VectorInBasis, rtol: float = 1e-7, atol: float = 1e-9) -> bool:
        """Equality up to tolerance (same direction set, any order)."""
        if set(self.basis_directions) != set(other.basis_directions):
            return False
        return bool(np.allclose(self.magnitudes, self._aligned(other), rtol=rtol, atol=atol))

    def project(self, space: VectorSpaceWithBasis) -> VectorInBasis:
        """Orthogonal projection onto `space`: its directions missing from self read as zero."""
        if space.basis == self.basis_directions:
            return self
        source = {d: i for i, d in enumerate(self.basis_directions)}
        out = np.zeros(self.magnitudes.shape[:-1] + (space.num_dims,), dtype=self.magnitudes.dtype)
        dst = [j for j, d in enumerate(space.basis) if d in source]
        src = [source[space.basis[j]] for j in dst]
        out[..., dst] = self.magnitudes[..., src]
        return VectorInBasis(space.basis, out)

    def magnitude(self, direction: BasisDirection) -> np.ndarray:
        """Magnitudes along one direction (batch-shaped)."""
        return self.magnitudes[..., self.space.index(direction)]

    @staticmethod
    def stack(vectors: Sequence[VectorInBasis], axis: int = 0) -> VectorInBasis:
        """Stack vectors of one space along a new leading/batch axis."""
        if not vectors:
            raise ValueError("stack needs at least one vector")
        first = vectors[0]
        if axis < 0:
            axis += first.magnitudes.ndim  # new axis counted before the basis axis
        mags = np.stack([first._aligned(v) for v in vectors], axis=axis)
        return VectorInBasis(first.basis_directions, mags)

    @staticmethod
    def sum(vectors: Sequence[VectorInBasis]) -> VectorInBasis:
        """Sum of vectors living in possibly different spaces, in the joined (sorted) space."""
        space = join_vector_spaces(*(v.space for v in vectors))
        total = space.null_vector(np.broadcast_shapes(*(v.shape[:-1] for v in vectors)))
        mags = total.magnitudes
        for v in vectors:
            mags = mags + v.project(space).magnitudes
        return VectorInBasis(space.basis, mags)
