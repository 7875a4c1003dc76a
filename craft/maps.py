"""Linear and bilinear maps between labelled vector spaces.

Row-vector convention throughout: a linear map sends `x` to `x @ matrix`, so
`matrix.shape == (input_space.num_dims, output_space.num_dims)` and composing "first A, then B"
is `A.matrix @ B.matrix` (written `A @ B` or `A.compose(B)`). A bilinear map scores a query `q`
(left space) against a key `k` (right space) as `q @ matrix @ k`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from craft.bases import BasisDirection, VectorInBasis, VectorSpaceWithBasis, join_vector_spaces


def _reindex_matrix(
    matrix: np.ndarray,
    rows_from: VectorSpaceWithBasis,
    rows_to: VectorSpaceWithBasis,
    cols_from: VectorSpaceWithBasis,
    cols_to: VectorSpaceWithBasis,
) -> np.ndarray:
    """Copy `matrix` (rows_from x cols_from) onto rows_to x cols_to, matching directions by label.

    Directions absent from the target are dropped; new target directions get zeros.
    """
    if rows_from.basis == rows_to.basis and cols_from.basis == cols_to.basis:
        return matrix
    row_dst = [i for i, d in enumerate(rows_to.basis) if d in rows_from]
    row_src = rows_from.indices(rows_to.basis[i] for i in row_dst)
    col_dst = [j for j, d in enumerate(cols_to.basis) if d in cols_from]
    col_src = cols_from.indices(cols_to.basis[j] for j in col_dst)
    out = np.zeros((rows_to.num_dims, cols_to.num_dims), dtype=matrix.dtype)
    out[np.ix_(row_dst, col_dst)] = matrix[np.ix_(row_src, col_src)]
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class LinearMap:
    """A linear map `input_space -> output_space` stored as a (d_in, d_out) matrix."""

    input_space: VectorSpaceWithBasis
    output_space: VectorSpaceWithBasis
    matrix: np.ndarray

    def __post_init__(self) -> None:
        matrix = np.asarray(self.matrix, dtype=np.float64)
        expected = (self.input_space.num_dims, self.output_space.num_dims)
        if matrix.shape != expected:
            raise ValueError(f"LinearMap matrix shape {matrix.shape} != {expected}")
        object.__setattr__(self, "matrix", matrix)

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_action(
        cls,
        input_space: VectorSpaceWithBasis,
        output_space: VectorSpaceWithBasis,
        action: Callable[[BasisDirection], VectorInBasis | None],
    ) -> LinearMap:
        """Build the map from its value on each input direction (None = maps to zero).

        Each result is projected onto `output_space` as a block, so the cost is one call of
        `action` per input direction plus one vectorised scatter.
        """
        rows = np.zeros((input_space.num_dims, output_space.num_dims))
        images = [action(d) for d in input_space.basis]
        present = [i for i, v in enumerate(images) if v is not None]
        if present:
            by_space: dict[tuple[BasisDirection, ...], list[int]] = {}
            for i in present:
                vec = images[i]
                if vec.magnitudes.ndim != 1:
                    raise ValueError("from_action: action must return an unbatched vector")
                by_space.setdefault(vec.basis_directions, []).append(i)
            for basis, idx in by_space.items():
                mags = np.stack([images[i].magnitudes for i in idx])
                src = VectorInBasis(basis, mags)
                rows[idx] = src.project(output_space).magnitudes
                unknown = set(basis) - set(output_space.basis)
                if unknown and np.any(mags[:, [basis.index(d) for d in unknown]]):
                    raise ValueError(
                        f"from_action: images use directions outside the output space: "
                        f"{sorted(str(d) for d in unknown)[:5]}"
                    )
        return cls(input_space, output_space, rows)

    @classmethod
    def identity(cls, space: VectorSpaceWithBasis) -> LinearMap:
        return cls(space, space, np.eye(space.num_dims))

    @classmethod
    def zero(cls, input_space: VectorSpaceWithBasis, output_space: VectorSpaceWithBasis) -> LinearMap:
        return cls(input_space, output_space, np.zeros((input_space.num_dims, output_space.num_dims)))

    # -- use ------------------------------------------------------------------------------------
    def apply(self, vector: VectorInBasis) -> VectorInBasis:
        """`x @ M` after projecting `x` onto the input space (other directions are ignored)."""
        x = vector.project(self.input_space).magnitudes
        return VectorInBasis(self.output_space.basis, x @ self.matrix)

    __call__ = apply

    def compose(self, then: LinearMap) -> LinearMap:
        """The map "self, then `then`"; shared directions are matched by label."""
        bridge = _reindex_matrix(
            np.eye(self.output_space.num_dims),
            self.output_space,
            self.output_space,
            self.output_space,
            then.input_space,
        )
        return LinearMap(self.input_space, then.output_space, self.matrix @ bridge @ then.matrix)

    def __matmul__(self, then: LinearMap) -> LinearMap:
        return self.compose(then)

    def __add__(self, other: LinearMap) -> LinearMap:
        return combine_in_parallel([self, other])

    def __mul__(self, scalar: float) -> LinearMap:
        return LinearMap(self.input_space, self.output_space, self.matrix * scalar)

    __rmul__ = __mul__

    def on_spaces(
        self, input_space: VectorSpaceWithBasis, output_space: VectorSpaceWithBasis
    ) -> LinearMap:
        """Re-express the map on other spaces: embedding into larger ones pads with zeros,
        restriction to smaller ones drops rows/columns."""
        return LinearMap(
            input_space,
            output_space,
            _reindex_matrix(self.matrix, self.input_space, input_space, self.output_space, output_space),
        )

    def entry(self, from_direction: BasisDirection, to_direction: BasisDirection) -> float:
        return float(self.matrix[self.input_space.index(from_direction), self.output_space.index(to_direction)])


def combine_in_parallel(maps: Sequence[LinearMap]) -> LinearMap:
    """Sum of maps, each embedded into the joined (sorted) input and output spaces."""
    if not maps:
        raise ValueError("combine_in_parallel needs at least one map")
    input_space = join_vector_spaces(*(m.input_space for m in maps))
    output_space = join_vector_spaces(*(m.output_space for m in maps))
    total = np.zeros((input_space.num_dims, output_space.num_dims))
    for m in maps:
        total += m.on_spaces(input_space, output_space).matrix
    return LinearMap(input_space, output_space, total)


def project(from_space: VectorSpaceWithBasis, to_space: VectorSpaceWithBasis) -> LinearMap:
    """The map keeping the directions shared by both spaces and dropping the rest."""
    eye = np.eye(from_space.num_dims)
    return LinearMap(
        from_space,
        to_space,
        _reindex_matrix(eye, from_space, from_space, from_space, to_space),
    )


@dataclasses.dataclass(frozen=True, eq=False)
class BilinearMap:
    """A scalar bilinear form `q @ matrix @ k` with q in `left_space` (query), k in `right_space` (key)."""

    left_space: VectorSpaceWithBasis
    right_space: VectorSpaceWithBasis
    matrix: np.ndarray

    def __post_init__(self) -> None:
        matrix = np.asarray(self.matrix, dtype=np.float64)
        expected = (self.left_space.num_dims, self.right_space.num_dims)
        if matrix.shape != expected:
            raise ValueError(f"BilinearMap matrix shape {matrix.shape} != {expected}")
        object.__setattr__(self, "matrix", matrix)

    def scores(self, queries: VectorInBasis, keys: VectorInBasis) -> np.ndarray:
        """All query/key scores: shape (..., n_queries, n_keys) for (..., n, d) inputs."""
        q = queries.project(self.left_space).magnitudes
        k = keys.project(self.right_space).magnitudes
        return (q @ self.matrix) @ np.swapaxes(k, -1, -2)

    def __call__(self, query: VectorInBasis, key: VectorInBasis) -> np.ndarray:
        """Score of one query against one key (batched inputs broadcast elementwise)."""
        q = query.project(self.left_space).magnitudes
        k = key.project(self.right_space).magnitudes
        return np.einsum("...i,ij,...j->...", q, self.matrix, k)

    def on_spaces(
        self, left_space: VectorSpaceWithBasis, right_space: VectorSpaceWithBasis
    ) -> BilinearMap:
        """Re-express on other spaces (zero-padding or dropping directions by label)."""
        return BilinearMap(
            left_space,
            right_space,
            _reindex_matrix(self.matrix, self.left_space, left_space, self.right_space, right_space),
        )

    def __add__(self, other: BilinearMap) -> BilinearMap:
        left = join_vector_spaces(self.left_space, other.left_space)
        right = join_vector_spaces(self.right_space, other.right_space)
        return BilinearMap(
            left, right, self.on_spaces(left, right).matrix + other.on_spaces(left, right).matrix
        )

    def __mul__(self, scalar: float) -> BilinearMap:
        return BilinearMap(self.left_space, self.right_space, self.matrix * scalar)

    __rmul__ = __mul__

    def entry(self, query_direction: BasisDirection, key_direction: BasisDirection) -> float:
        return float(
            self.matrix[self.left_space.index(query_direction), self.right_space.index(key_direction)]
        )
