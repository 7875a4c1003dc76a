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

Narrow lookups (`narrow=True`, the compiler's `narrow_lookups` pass): the units of a Map are
chosen per output value `v`, with `S` the inputs sent to `v` (`k` of the `m` input values), as the
form with the fewest non-zero weights of

* one unit per input of `S`, as above (`3k` non-zeros);
* one unit for `S`, `relu(2 sum_S x - one)` (`k + 2`): it reads `k` input coordinates, so in a
  compressed stream it sums `k` interference terms where a per-input unit has one;
* one unit for the complement, `relu(one - 2 sum_{not S} x - 2 bos)` (`m - k + 3`), only when
  the caller promises that the input is a one-hot at every position but BOS (`bos_space` given:
  an s-op that is never None). It is 1 where the input holds a value of `S` and an exact 0 at BOS
  and wherever the input holds another value, with the same margin of 1; at padding positions
  (input empty, BOS not marked) it fires, which nothing reads (padding keys are masked).

Inputs whose result writes nothing get no unit. `tokens == "c"` over 25 tokens then needs two
units (`c`, and the complement of `c`) and 7 non-zeros instead of 25 units and 75.

Blocks larger than `craft.maps.SPARSE_ABOVE` entries are built as scipy.sparse matrices (a
lookup table has one entry per row): same weights, stored by their non-zeros.

Deviation from docs/architecture.md: the single-input builders take an optional keyword
`hidden_name` (default `"<output label>_hidden"`); the listed positional signature is unchanged.
"""

from __future__ import annotations

import dataclasses
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


def _matrix(rows: np.ndarray, cols: np.ndarray, data: np.ndarray, shape: tuple[int, int]) -> np.ndarray | sparse.csr_array:
    """The matrix with `data[n]` at `(rows[n], cols[n])` (distinct positions), as scipy.sparse
    when `shape` is large (`craft.maps.builds_sparse`), else dense."""
    if builds_sparse(*shape):
        return sparse.csr_array((data, (rows, cols)), shape=shape)
    matrix = np.zeros(shape)
    matrix[rows, cols] = data
    return matrix


def _one_per_row(cols: np.ndarray, shape: tuple[int, int]) -> np.ndarray | sparse.csr_array:
    """The 0/1 matrix with a 1 at (i, cols[i]) for every row whose cols[i] >= 0."""
    rows = np.nonzero(cols >= 0)[0]
    return _matrix(rows, cols[rows], np.ones(rows.size), shape)


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


@dataclasses.dataclass(frozen=True)
class OutputUnit:
    """The value of a narrow lookup's hidden unit (module docstring): it fires for every input
    sent to `value`, reading those inputs, or with `complement` the inputs *not* sent to it.
    Printed `->value` or `->value (complement)`."""

    value: Hashable
    complement: bool = False

    def __repr__(self) -> str:
        return f"->{self.value!r}" + (" (complement)" if self.complement else "")


def _narrow_lookup(
    input_space: VectorSpaceWithBasis,
    output_space: VectorSpaceWithBasis,
    hidden_name: str,
    one_space: VectorSpaceWithBasis,
    bos_space: VectorSpaceWithBasis | None,
    outputs: Sequence[tuple[Hashable, int, float] | None],
) -> MLP:
    """The narrow lookup (module docstring). `outputs[i]` is what input `i` writes: `(key, column,
    weight)`, inputs with one key writing the same, or None (nothing)."""
    if one_space.num_dims != 1 or (bos_space is not None and bos_space.num_dims != 1):
        raise ValueError("one_space and bos_space must have exactly one direction")
    m = input_space.num_dims
    groups: dict[Hashable, list[int]] = {}
    for i, out in enumerate(outputs):
        if out is not None:
            groups.setdefault(out[0], []).append(i)
    one, bos = m, m + 1
    units: list[tuple[Hashable, list[tuple[int, float]], int, float]] = []  # value, reads, column, weight
    for key, members in groups.items():
        written = outputs[members[0]]
        assert written is not None  # `groups` holds only inputs that write
        _, column, weight = written
        k = len(members)
        costs = {"input": 3 * k, "group": k + 2}
        if bos_space is not None:
            costs["complement"] = m - k + 3
        form = min(costs, key=lambda name: (costs[name], list(costs).index(name)))
        if form == "input":
            for i in members:
                units.append((input_space.basis[i].value, [(i, 2.0), (one, -1.0)], column, weight))
        elif form == "group":
            units.append((OutputUnit(key), [(i, 2.0) for i in members] + [(one, -1.0)], column, weight))
        else:
            others = sorted(set(range(m)) - set(members))
            reads = [(i, -2.0) for i in others] + [(one, 1.0), (bos, -2.0)]
            units.append((OutputUnit(key, complement=True), reads, column, weight))
    extra = one_space.basis + (bos_space.basis if bos_space is not None else ())
    reads_space = VectorSpaceWithBasis(input_space.basis + extra)
    hidden = VectorSpaceWithBasis(tuple(BasisDirection(hidden_name, unit[0]) for unit in units))
    shape = (reads_space.num_dims, len(units))
    rows = np.array([row for unit in units for row, _ in unit[1]], dtype=np.int64)
    cols = np.array([j for j, unit in enumerate(units) for _ in unit[1]], dtype=np.int64)
    data = np.array([w for unit in units for _, w in unit[1]])
    out_rows = np.arange(len(units))
    out_cols = np.array([unit[2] for unit in units], dtype=np.int64)
    out_data = np.array([unit[3] for unit in units], dtype=float)
    first = _matrix(rows, cols, data, shape)
    second = _matrix(out_rows, out_cols, out_data, (len(units), output_space.num_dims))
    return MLP(LinearMap(reads_space, hidden, first), LinearMap(hidden, output_space, second))


def map_categorical_mlp(
    input_space: VectorSpaceWithBasis,
    output_space: VectorSpaceWithBasis,
    operation: Callable[[Hashable], Hashable | None],
    hidden_name: str | None = None,
    one_space: VectorSpaceWithBasis | None = None,
    *,
    narrow: bool = False,
    bos_space: VectorSpaceWithBasis | None = None,
) -> MLP:
    """Lookup-table MLP: input one-hot of x -> output one-hot of operation(x).

    `operation(x)` returning None, or a value that is not in `output_space`, writes nothing.
    Pass `one_space` to threshold the input (clean outputs from noisy one-hots). With `narrow`
    (needs `one_space`), the units are chosen per output value by their non-zeros; `bos_space`
    then also allows complement units and promises that the input is never None (module
    docstring).
    """
    hidden_name = hidden_name or _hidden_default(output_space)
    results = [operation(d.value) for d in input_space.basis]
    cols = _output_indices(output_space, results)
    if narrow:
        if one_space is None:
            raise ValueError("a narrow lookup needs one_space (its units are thresholded)")
        outputs = [(output_space.basis[c].value, int(c), 1.0) if c >= 0 else None for c in cols]
        return _narrow_lookup(input_space, output_space, hidden_name, one_space, bos_space, outputs)
    first = _lookup_hidden(input_space, hidden_name, one_space)
    second = _one_per_row(cols, (input_space.num_dims, output_space.num_dims))
    return MLP(first, LinearMap(first.output_space, output_space, second))


def map_categorical_to_numerical_mlp(
    input_space: VectorSpaceWithBasis,
    output_space: VectorSpaceWithBasis,
    operation: Callable[[Hashable], float | None],
    hidden_name: str | None = None,
    one_space: VectorSpaceWithBasis | None = None,
    *,
    narrow: bool = False,
    bos_space: VectorSpaceWithBasis | None = None,
) -> MLP:
    """Input one-hot of x -> operation(x) on the single numerical output direction (None -> 0).

    Pass `one_space` to threshold the input (clean outputs from noisy one-hots); `narrow` and
    `bos_space` as in `map_categorical_mlp` (one unit per distinct non-zero result).
    """
    if output_space.num_dims != 1:
        raise ValueError("numerical output space must have exactly one direction")
    hidden_name = hidden_name or _hidden_default(output_space)
    results = [operation(d.value) for d in input_space.basis]
    values = _numerical_outputs(results, "map_categorical_to_numerical_mlp")
    if narrow:
        if one_space is None:
            raise ValueError("a narrow lookup needs one_space (its units are thresholded)")
        outputs = [(float(v), 0, float(v)) if v != 0 else None for v in values]
        return _narrow_lookup(input_space, output_space, hidden_name, one_space, bos_space, outputs)
    first = _lookup_hidden(input_space, hidden_name, one_space)
    return MLP(first, LinearMap(first.output_space, output_space, values[:, None]))


def saturated(mlp: MLP, one: BasisDirection) -> MLP:
    """`mlp` with each thresholded lookup unit `relu(z)` (z = 1 where it fires, at most -1 where it
    does not, as every unit of these builders that reads `one` has) replaced by the clamp
    `relu(z + one/2) - relu(z - one/2)`: the same 1 and 0 on clean inputs, but flat around both,
    so an input one-hot carrying an error below 1/2 of the margin (a norm's scale, float noise)
    gives the exact output instead of passing the error on doubled (`2 x - one` doubles it,
    `2 x + 2 y - 3 one` quadruples it). Used where errors would compound: under a norm
    (`compile_rasp(..., norm=...)`), whose divisor moves every read by up to its spread.

    Raises:
      ValueError: `mlp` does not read `one`.
    """
    if one not in mlp.input_space:
        raise ValueError(f"saturated needs a lookup that reads {one}")
    first, second = sparse.csr_array(mlp.first.matrix), sparse.csr_array(mlp.second.matrix)
    units = first.shape[1]
    bias = sparse.csr_array((np.full(units, 0.5), (np.full(units, mlp.input_space.index(one)), np.arange(units))),
                            shape=first.shape)
    order = np.arange(2 * units).reshape(2, units).T.ravel()  # unit j's low and high halves side by side
    widened = sparse.hstack([first + bias, first - bias], format="csc")[:, order]
    out = sparse.vstack([second, -second], format="csr")[order]
    hidden = VectorSpaceWithBasis(tuple(
        BasisDirection(d.name, (d.value, side)) for d in mlp.hidden_space.basis for side in ("low", "high")))

    def as_stored(matrix: sparse.sparray) -> np.ndarray | sparse.csr_array:
        return sparse.csr_array(matrix) if builds_sparse(*matrix.shape) else matrix.toarray()

    return MLP(LinearMap(mlp.input_space, hidden, as_stored(widened)),
               LinearMap(hidden, mlp.output_space, as_stored(out)), mlp.activation)


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
    data = np.concatenate([np.full(pair.size, w) for w in weights])
    first = _matrix(np.concatenate(rows), np.tile(units, 3), data, shape)
    if _is_numerical_space(output_space):
        second = _numerical_outputs(results, "sequence_map_categorical_mlp")[:, None]
    else:
        second = _one_per_row(_output_indices(output_space, results), (len(pair), output_space.num_dims))
    return MLP(LinearMap(input_space, hidden, first), LinearMap(hidden, output_space, second))
