"""MLPs for Maps and SequenceMaps on categorical (one-hot) inputs: lookup tables.

Map (one input): one ReLU unit per input value, the second layer writes the table entry of each
value. Without `one_space` the hidden layer is a plain copy of the input one-hot (no bias); with
it, each unit computes `relu(2 x_onehot - one)`, which maps 1 to 1 and anything below 1/2 to an
exact 0, so a one-hot carrying float noise (e.g. from a discretising MLP, ~1e-5) comes out clean
instead of having its noise multiplied by the table's values. Either way zero in gives zero out,
so the BOS position and an empty (None) input write nothing and no BOS term is needed.

SequenceMap (two inputs): one hidden unit per value pair (x, y) computing
`relu(2 x_onehot + 2 y_onehot - 3 one)`, which is 1 exactly when both inputs hold that pair and an
exact 0 otherwise, with a margin of 1 against noise in either input. Its pre-activation is
negative whenever either input is empty, including at BOS (both inputs zero, `one` = 1), so it
satisfies the BOS-zero invariant without a BOS term.

Blocks larger than `craft.maps.SPARSE_ABOVE` entries are built as scipy.sparse matrices (a
lookup table has one entry per row): same weights, stored by their non-zeros.

Deviation from docs/architecture.md: the single-input builders take an optional keyword
`hidden_name` (default `"<output label>_hidden"`); the listed positional signature is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Sequence
from typing import Any

import numpy as np
from scipy import sparse

from craft.bases import BasisDirection, VectorSpaceWithBasis
from craft.blocks import MLP
from craft.maps import LinearMap, builds_sparse


def _hidden_default(output_space: VectorSpaceWithBasis) -> str:
    if output_space.num_dims == 0:
        raise ValueError("output space is empty; pass hidden_name explicitly")
    return f"{output_space.basis[0].name}_hidden"


def _is_numerical_space(space: VectorSpaceWithBasis) -> bool:
    return space.num_dims == 1 and space.basis[0].value is None


def _object_array(values: Sequence[Any]) -> np.ndarray:
    """1-D object array holding the values as-is (tuples are not unpacked)."""
    arr = np.empty(len(values), dtype=object)
    arr[:] = list(values) if values else []
    return arr


def _output_indices(output_space: VectorSpaceWithBasis, results: Sequence[Any]) -> np.ndarray:
    """Output index of each result value (categorical), -1 when None or not in the space."""
    name = output_space.basis[0].name if output_space.num_dims else ""
    lookup = {d.value: i for i, d in enumerate(output_space.basis) if d.name == name}
    out = np.full(len(results), -1, dtype=np.int64)
    for i, r in enumerate(results):
        if r is not None:
            try:
                out[i] = lookup.get(r, -1)
            except TypeError:  # unhashable result: cannot be a direction value
                pass
    return out


def _one_per_row(cols: np.ndarray, shape: tuple[int, int]) -> np.ndarray | sparse.csr_array:
    """The 0/1 matrix with a 1 at (i, cols[i]) for every row whose cols[i] >= 0."""
    rows = np.nonzero(cols >= 0)[0]
    if builds_sparse(*shape):
        return sparse.csr_array((np.ones(rows.size), (rows, cols[rows])), shape=shape)
    matrix = np.zeros(shape)
    matrix[rows, cols[rows]] = 1.0
    return matrix


def _numerical_outputs(results: Sequence[Any], what: str) -> np.ndarray:
    """Results as floats; None writes 0 (nothing)."""
    out = np.zeros(len(results))
    for i, r in enumerate(results):
        if r is None:
            continue
        try:
            out[i] = float(r)
        except (TypeError, ValueError):
            raise ValueError(f"{what}: result {r!r} is not a number; a numerical output needs numbers") from None
    return out


def _lookup_hidden(
    input_space: VectorSpaceWithBasis, hidden_name: str, one_space: VectorSpaceWithBasis | None
) -> LinearMap:
    """One hidden unit per input value: a copy, or thresholded at 1/2 when `one_space` is given."""
    hidden = VectorSpaceWithBasis(tuple(BasisDirection(hidden_name, d.value) for d in input_space.basis))
    m = input_space.num_dims
    big = builds_sparse(m, m)
    if one_space is None:
        return LinearMap(input_space, hidden, sparse.identity(m, format="csr") if big else np.eye(m))
    if one_space.num_dims != 1:
        raise ValueError("one_space must have exactly one direction")
    reads = VectorSpaceWithBasis(input_space.basis + one_space.basis)
    if big:
        matrix = sparse.vstack([2.0 * sparse.identity(m, format="csr"), -np.ones((1, m))], format="csr")
    else:
        matrix = np.vstack([2.0 * np.eye(m), -np.ones((1, m))])
    return LinearMap(reads, hidden, matrix)


def map_categorical_mlp(
    input_space: VectorSpaceWithBasis,
    output_space: VectorSpaceWithBasis,
    operation: Callable[[Hashable], Hashable | None],
    hidden_name: str | None = None,
    one_space: VectorSpaceWithBasis | None = None,
) -> MLP:
    """Lookup-table MLP: input one-hot of x -> output one-hot of operation(x).

    `operation(x)` returning None, or a value that is not in `output_space`, writes nothing.
    Pass `one_space` to threshold the input (clean outputs from noisy one-hots).
    """
    first = _lookup_hidden(input_space, hidden_name or _hidden_default(output_space), one_space)
    results = [operation(d.value) for d in input_space.basis]
    cols = _output_indices(output_space, results)
    second = _one_per_row(cols, (input_space.num_dims, output_space.num_dims))
    return MLP(first, LinearMap(first.output_space, output_space, second))


def map_categorical_to_numerical_mlp(
    input_space: VectorSpaceWithBasis,
    output_space: VectorSpaceWithBasis,
    operation: Callable[[Hashable], float | None],
    hidden_name: str | None = None,
    one_space: VectorSpaceWithBasis | None = None,
) -> MLP:
    """Input one-hot of x -> operation(x) on the single numerical output direction (None -> 0).

    Pass `one_space` to threshold the input (clean outputs from noisy one-hots).
    """
    if output_space.num_dims != 1:
        raise ValueError("numerical output space must have exactly one direction")
    first = _lookup_hidden(input_space, hidden_name or _hidden_default(output_space), one_space)
    results = [operation(d.value) for d in input_space.basis]
    second = _numerical_outputs(results, "map_categorical_to_numerical_mlp")[:, None]
    return MLP(first, LinearMap(first.output_space, output_space, second))


def _pairwise(operation: Callable[[Any, Any], Any], xs: list, ys: list) -> list:
    """operation(x, y) for all pairs, x-major, via numpy's object ufunc machinery."""
    if not xs or not ys:
        return []
    table = np.frompyfunc(operation, 2, 1)(_object_array(xs)[:, None], _object_array(ys)[None, :])
    return list(table.ravel())


def sequence_map_categorical_mlp(
    input1_space: VectorSpaceWithBasis,
    input2_space: VectorSpaceWithBasis,
    output_space: VectorSpaceWithBasis,
    operation: Callable[[Hashable, Hashable], Any],
    one_space: VectorSpaceWithBasis,
    hidden_name: str,
    pairs: Collection[tuple[Hashable, Hashable]] | None = None,
) -> MLP:
    """Two-input lookup table with one hidden unit per value pair (x-major order).

    Categorical output (one-hot of operation(x, y), None / unknown values write nothing), or
    numerical when `output_space` is a single direction with value None (None writes 0). The two
    input spaces must be disjoint (a SequenceMap of an s-op with itself is a Map). `pairs`, when
    given, keeps only the units of those (x, y) pairs: the caller asserts no other pair occurs
    (the table then writes nothing for it).
    """
    if set(input1_space.basis) & set(input2_space.basis):
        raise ValueError("sequence_map_categorical_mlp: input spaces overlap; use a Map instead")
    if one_space.num_dims != 1:
        raise ValueError("one_space must have exactly one direction")
    n1, n2 = input1_space.num_dims, input2_space.num_dims
    xs = [d.value for d in input1_space.basis]
    ys = [d.value for d in input2_space.basis]
    pair = np.arange(n1 * n2)
    results = _pairwise(operation, xs, ys)
    if pairs is not None:
        kept = set(pairs)
        pair = np.array([p for p in pair if (xs[p // n2], ys[p % n2]) in kept], dtype=np.int64)
        results = [results[p] for p in pair]
    hidden = VectorSpaceWithBasis(
        tuple(BasisDirection(hidden_name, (xs[p // n2], ys[p % n2])) for p in pair)
    )
    input_space = VectorSpaceWithBasis(input1_space.basis + input2_space.basis + one_space.basis)
    units = np.arange(len(pair))
    shape = (n1 + n2 + 1, len(pair))
    rows = (pair // max(n2, 1), n1 + pair % max(n2, 1), np.full(pair.size, n1 + n2))
    weights = (2.0, 2.0, -3.0)
    if builds_sparse(*shape):
        data = np.concatenate([np.full(pair.size, w) for w in weights])
        first = sparse.csr_array((data, (np.concatenate(rows), np.tile(units, 3))), shape=shape)
    else:
        first = np.zeros(shape)
        for row, weight in zip(rows, weights):
            first[row, units] = weight
    if _is_numerical_space(output_space):
        second = _numerical_outputs(results, "sequence_map_categorical_mlp")[:, None]
    else:
        second = _one_per_row(_output_indices(output_space, results), (len(pair), output_space.num_dims))
    return MLP(LinearMap(input_space, hidden, first), LinearMap(hidden, output_space, second))
