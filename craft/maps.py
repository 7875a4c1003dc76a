"""Linear and bilinear maps between labelled vector spaces.

Row-vector convention throughout: a linear map sends `x` to `x @ matrix`, so
`matrix.shape == (input_space.num_dims, output_space.num_dims)` and composing "first A, then B"
is `A.matrix @ B.matrix` (written `A @ B` or `A.compose(B)`). A bilinear map scores a query `q`
(left space) against a key `k` (right space) as `q @ matrix @ k`.

Large blocks: `matrix` may be a `scipy.sparse` array (stored CSR) instead of a numpy array, so
a lookup table over 10,000 values stores its 10,000 entries, not 10^8 zeros. Every operation
here keeps a sparse matrix sparse. `FactoredBilinearMap` holds a bilinear map only as sparse
factors `A @ B.T` (an order comparison over m values has about m^2 / 2 non-zero scores but
factors with O(m log m) non-zeros, see `dyadic_prefix_factors`). `SPARSE_ABOVE` is the size
(rows x columns) from which the chamber builds blocks sparse; smaller blocks stay dense numpy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TypeGuard

import numpy as np
from scipy import sparse

from craft.bases import BasisDirection, VectorInBasis, VectorSpaceWithBasis, join_vector_spaces

# Blocks with more entries (rows x columns) than this are built as scipy.sparse matrices.
SPARSE_ABOVE = 1_000_000


def is_sparse(matrix: object) -> TypeGuard[sparse.sparray]:
    """Whether `matrix` is a scipy.sparse matrix (else a numpy array)."""
    return sparse.issparse(matrix)


def builds_sparse(rows: int, cols: int) -> bool:
    """Whether a block of this shape is built sparse (`SPARSE_ABOVE`)."""
    return rows * cols > SPARSE_ABOVE


def _as_matrix(matrix: object) -> np.ndarray | sparse.csr_array:
    if sparse.issparse(matrix):
        return sparse.csr_array(matrix, dtype=np.float64)
    return np.asarray(matrix, dtype=np.float64)


def to_dense(matrix: np.ndarray | sparse.sparray) -> np.ndarray:
    """A numpy copy (or the array itself) of a dense or sparse matrix."""
    return matrix.toarray() if is_sparse(matrix) else np.asarray(matrix)


def _positions(from_space: VectorSpaceWithBasis, to_space: VectorSpaceWithBasis) -> np.ndarray:
    """Index in `to_space` of each direction of `from_space`, -1 where absent."""
    return np.fromiter(
        (to_space._index.get(d, -1) for d in from_space.basis), dtype=np.int64, count=from_space.num_dims
    )


def _reindex_sparse(
    matrix: sparse.sparray,
    rows_from: VectorSpaceWithBasis,
    rows_to: VectorSpaceWithBasis,
    cols_from: VectorSpaceWithBasis,
    cols_to: VectorSpaceWithBasis,
) -> sparse.csr_array:
    coo = sparse.coo_array(matrix)
    rows = _positions(rows_from, rows_to)[coo.row]
    cols = _positions(cols_from, cols_to)[coo.col]
    keep = (rows >= 0) & (cols >= 0)
    shape = (rows_to.num_dims, cols_to.num_dims)
    return sparse.csr_array((coo.data[keep], (rows[keep], cols[keep])), shape=shape)


def _reindex_rows(
    matrix: sparse.sparray, rows_from: VectorSpaceWithBasis, rows_to: VectorSpaceWithBasis
) -> sparse.csr_array:
    """`matrix`'s rows moved from `rows_from` onto `rows_to` by label (columns unchanged)."""
    if rows_from.basis == rows_to.basis:
        return sparse.csr_array(matrix)
    coo = sparse.coo_array(matrix)
    rows = _positions(rows_from, rows_to)[coo.row]
    keep = rows >= 0
    shape = (rows_to.num_dims, matrix.shape[1])
    return sparse.csr_array((coo.data[keep], (rows[keep], coo.col[keep])), shape=shape)


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
    if sparse.issparse(matrix):
        return _reindex_sparse(matrix, rows_from, rows_to, cols_from, cols_to)
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
        matrix = _as_matrix(self.matrix)
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
        present = {i: v for i, v in enumerate(images) if v is not None}
        if present:
            by_space: dict[tuple[BasisDirection, ...], list[int]] = {}
            for i, vec in present.items():
                if vec.magnitudes.ndim != 1:
                    raise ValueError("from_action: action must return an unbatched vector")
                by_space.setdefault(vec.basis_directions, []).append(i)
            for basis, idx in by_space.items():
                mags = np.stack([present[i].magnitudes for i in idx])
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
        return VectorInBasis(self.output_space.basis, right_multiply(x, self.matrix))

    __call__ = apply

    def compose(self, then: LinearMap) -> LinearMap:
        """The map "self, then `then`"; shared directions are matched by label."""
        either_sparse = sparse.issparse(self.matrix) or sparse.issparse(then.matrix)
        eye = sparse.identity(self.output_space.num_dims, format="csr") if either_sparse else None
        bridge = _reindex_matrix(
            np.eye(self.output_space.num_dims) if eye is None else eye,
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


def right_multiply(x: np.ndarray, matrix: np.ndarray | sparse.sparray) -> np.ndarray:
    """`x @ matrix` for `x` of shape (..., rows) and a dense or sparse matrix."""
    if not sparse.issparse(matrix):
        return x @ matrix
    flat = np.asarray(x, dtype=np.float64).reshape(-1, x.shape[-1])
    return np.asarray(flat @ matrix).reshape(x.shape[:-1] + (matrix.shape[1],))


def sum_matrices(matrices: Sequence[np.ndarray | sparse.sparray], shape: tuple[int, int]):
    """Sum of equally shaped matrices: sparse when any of them is (dense zeros when none given)."""
    if any(sparse.issparse(m) for m in matrices):
        total = sparse.csr_array(shape, dtype=np.float64)
        for m in matrices:
            total = total + sparse.csr_array(m)
        return total
    total = np.zeros(shape)
    for m in matrices:
        total += m
    return total


def combine_in_parallel(maps: Sequence[LinearMap]) -> LinearMap:
    """Sum of maps, each embedded into the joined (sorted) input and output spaces."""
    if not maps:
        raise ValueError("combine_in_parallel needs at least one map")
    input_space = join_vector_spaces(*(m.input_space for m in maps))
    output_space = join_vector_spaces(*(m.output_space for m in maps))
    shape = (input_space.num_dims, output_space.num_dims)
    total = sum_matrices([m.on_spaces(input_space, output_space).matrix for m in maps], shape)
    return LinearMap(input_space, output_space, total)


def project(from_space: VectorSpaceWithBasis, to_space: VectorSpaceWithBasis) -> LinearMap:
    """The map keeping the directions shared by both spaces and dropping the rest."""
    if builds_sparse(from_space.num_dims, to_space.num_dims):
        eye = sparse.identity(from_space.num_dims, format="csr")
    else:
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
        matrix = _as_matrix(self.matrix)
        expected = (self.left_space.num_dims, self.right_space.num_dims)
        if matrix.shape != expected:
            raise ValueError(f"BilinearMap matrix shape {matrix.shape} != {expected}")
        object.__setattr__(self, "matrix", matrix)

    def scores(self, queries: VectorInBasis, keys: VectorInBasis) -> np.ndarray:
        """All query/key scores: shape (..., n_queries, n_keys) for (..., n, d) inputs."""
        q = queries.project(self.left_space).magnitudes
        k = keys.project(self.right_space).magnitudes
        return right_multiply(q, self.matrix) @ np.swapaxes(k, -1, -2)

    def __call__(self, query: VectorInBasis, key: VectorInBasis) -> np.ndarray:
        """Score of one query against one key (batched inputs broadcast elementwise)."""
        q = query.project(self.left_space).magnitudes
        k = key.project(self.right_space).magnitudes
        if sparse.issparse(self.matrix):
            return np.sum(right_multiply(q, self.matrix) * k, axis=-1)
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

    def __add__(self, other: BilinearMap | FactoredBilinearMap) -> BilinearMap | FactoredBilinearMap:
        if isinstance(other, FactoredBilinearMap):
            return other + self
        left = join_vector_spaces(self.left_space, other.left_space)
        right = join_vector_spaces(self.right_space, other.right_space)
        shape = (left.num_dims, right.num_dims)
        terms: tuple[BilinearMap, ...] = (self, other)
        if any(sparse.issparse(term.matrix) for term in terms):  # a small dense term (a BOS
            # bias) must not be padded to a dense matrix of the large sparse one's size
            terms = tuple(BilinearMap(t.left_space, t.right_space, sparse.csr_array(t.matrix)) for t in terms)
        parts = [term.on_spaces(left, right).matrix for term in terms]
        return BilinearMap(left, right, sum_matrices(parts, shape))

    def __mul__(self, scalar: float) -> BilinearMap:
        return BilinearMap(self.left_space, self.right_space, self.matrix * scalar)

    __rmul__ = __mul__

    def entry(self, query_direction: BasisDirection, key_direction: BasisDirection) -> float:
        return float(
            self.matrix[self.left_space.index(query_direction), self.right_space.index(key_direction)]
        )


def _identity_factors(matrix: np.ndarray | sparse.sparray) -> tuple[sparse.csr_array, sparse.csr_array]:
    """Exact sparse factors `A, B` of `matrix = A @ B.T`, the narrower of `I, Mᵀ` and `M, I`."""
    rows, cols = matrix.shape
    matrix = sparse.csr_array(matrix, dtype=np.float64)
    if rows <= cols:
        return sparse.identity(rows, format="csr"), sparse.csr_array(matrix.T)
    return matrix, sparse.identity(cols, format="csr")


@dataclasses.dataclass(frozen=True, eq=False)
class FactoredBilinearMap:
    """A bilinear form `q @ A @ B.T @ k` kept as its sparse factors, never as the full matrix.

    `left_factor` is (left dims x r), `right_factor` (right dims x r). Same interface as
    `BilinearMap`; `matrix` builds the full product (only for small maps: inspection, tests).
    """

    left_space: VectorSpaceWithBasis
    right_space: VectorSpaceWithBasis
    left_factor: sparse.csr_array
    right_factor: sparse.csr_array

    def __post_init__(self) -> None:
        left = sparse.csr_array(self.left_factor, dtype=np.float64)
        right = sparse.csr_array(self.right_factor, dtype=np.float64)
        if left.shape[0] != self.left_space.num_dims or right.shape[0] != self.right_space.num_dims:
            raise ValueError(
                f"FactoredBilinearMap factor rows {left.shape[0]}, {right.shape[0]} != space sizes "
                f"{self.left_space.num_dims}, {self.right_space.num_dims}"
            )
        if left.shape[1] != right.shape[1]:
            raise ValueError(f"FactoredBilinearMap factor widths differ: {left.shape[1]} != {right.shape[1]}")
        object.__setattr__(self, "left_factor", left)
        object.__setattr__(self, "right_factor", right)

    @classmethod
    def from_map(cls, bilinear: BilinearMap | FactoredBilinearMap) -> FactoredBilinearMap:
        """The same form as factors (a `BilinearMap` as `I, Mᵀ` or `M, I`)."""
        if isinstance(bilinear, FactoredBilinearMap):
            return bilinear
        return cls(bilinear.left_space, bilinear.right_space, *_identity_factors(bilinear.matrix))

    @property
    def width(self) -> int:
        return self.left_factor.shape[1]

    @property
    def matrix(self) -> np.ndarray:
        """The full (left dims x right dims) matrix, dense."""
        return (self.left_factor @ self.right_factor.T).toarray()

    def scores(self, queries: VectorInBasis, keys: VectorInBasis) -> np.ndarray:
        """All query/key scores: shape (..., n_queries, n_keys) for (..., n, d) inputs."""
        q = right_multiply(queries.project(self.left_space).magnitudes, self.left_factor)
        k = right_multiply(keys.project(self.right_space).magnitudes, self.right_factor)
        return q @ np.swapaxes(k, -1, -2)

    def __call__(self, query: VectorInBasis, key: VectorInBasis) -> np.ndarray:
        """Score of one query against one key (batched inputs broadcast elementwise)."""
        q = right_multiply(query.project(self.left_space).magnitudes, self.left_factor)
        k = right_multiply(key.project(self.right_space).magnitudes, self.right_factor)
        return np.sum(q * k, axis=-1)

    def on_spaces(
        self, left_space: VectorSpaceWithBasis, right_space: VectorSpaceWithBasis
    ) -> FactoredBilinearMap:
        """Re-express on other spaces (zero rows for new directions, dropped rows for absent ones)."""
        return FactoredBilinearMap(
            left_space,
            right_space,
            _reindex_rows(self.left_factor, self.left_space, left_space),
            _reindex_rows(self.right_factor, self.right_space, right_space),
        )

    def __add__(self, other: BilinearMap | FactoredBilinearMap) -> FactoredBilinearMap:
        """The sum, as the factors side by side: `[A1 A2] @ [B1 B2].T`."""
        other = FactoredBilinearMap.from_map(other)
        left = join_vector_spaces(self.left_space, other.left_space)
        right = join_vector_spaces(self.right_space, other.right_space)
        mine, theirs = self.on_spaces(left, right), other.on_spaces(left, right)
        return FactoredBilinearMap(
            left,
            right,
            sparse.hstack([mine.left_factor, theirs.left_factor], format="csr"),
            sparse.hstack([mine.right_factor, theirs.right_factor], format="csr"),
        )

    def __mul__(self, scalar: float) -> FactoredBilinearMap:
        return FactoredBilinearMap(self.left_space, self.right_space, self.left_factor * scalar, self.right_factor)

    __rmul__ = __mul__

    def entry(self, query_direction: BasisDirection, key_direction: BasisDirection) -> float:
        row = self.left_factor[[self.left_space.index(query_direction)]]
        col = self.right_factor[[self.right_space.index(key_direction)]]
        return float((row @ col.T).toarray()[0, 0])


def dyadic_prefix_factors(
    key_order: np.ndarray, lengths: np.ndarray, value: float = 1.0
) -> tuple[sparse.csr_array, sparse.csr_array]:
    """Sparse `A` (queries x r), `B` (keys x r) with `(A @ B.T)[q, k] = value` exactly when key
    `k` is among the first `lengths[q]` keys of `key_order`, else 0.

    The columns are aligned power-of-two blocks of positions in `key_order`; a prefix of length
    L is the disjoint union of the blocks given by L's binary digits, so each query row has at
    most log2(m) + 1 entries, every key at most as many, and every score is one product
    `value * 1` (exact in floating point). Only blocks some prefix uses are kept.
    """
    blocks: dict[tuple[int, int], int] = {}  # (start, size) -> column
    query_rows, query_cols = [], []
    for query, length in enumerate(np.asarray(lengths, dtype=np.int64).tolist()):
        start = 0
        for bit in reversed(range(length.bit_length())):
            size = 1 << bit
            if length & size:
                query_rows.append(query)
                query_cols.append(blocks.setdefault((start, size), len(blocks)))
                start += size
    key_rows, key_cols = [], []
    for (start, size), column in blocks.items():
        key_rows.extend(np.asarray(key_order[start : start + size]).tolist())
        key_cols.extend([column] * size)
    a = sparse.csr_array(
        (np.full(len(query_rows), float(value)), (query_rows, query_cols)), shape=(len(lengths), len(blocks))
    )
    b = sparse.csr_array((np.ones(len(key_rows)), (key_rows, key_cols)), shape=(len(key_order), len(blocks)))
    return a, b
