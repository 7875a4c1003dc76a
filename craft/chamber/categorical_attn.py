"""Attention for Select/Aggregate: the direct 0/1 selector matrix, the BOS default, W_OV maps.

Scores. `selector_qk` gives the "direct" matrix D[q, k] = 1 when predicate(key_value, query_value)
holds, over the one-hot spaces of the query and key s-ops. A conjunction of n leaf selectors is
the sum of their D's, so a key is selected exactly when its score is n and otherwise scores at most
n - 1. `attention_head` adds one more term, `one` (query) x `tokens:BOS` (key), with weight
n - 1/2 and multiplies everything by `coldness`: BOS then loses to any selected key by
coldness / 2 in logit and beats every unselected key by coldness / 2, so softmax averages the
selected keys, and attends to BOS (whose value subspace is 0: the default) when none is selected.
With `always_attend_to_bos`, BOS gets weight n and counts as one more selected key (used by
selector width). With coldness 100 the leakage onto losing keys is at most T * e^-50 per position.

Large selectors (more than `craft.maps.SPARSE_ABOVE` query x key pairs) never build the dense
table: an order comparison (LT, LEQ, GT, GEQ) over sortable values selects, for each query, a
prefix of the keys in sorted order, so its matrix is built as exact dyadic factors
(`craft.maps.dyadic_prefix_factors`, O(m log m) non-zeros for m values); EQ as a sparse matrix of
its matches; anything else is evaluated pair by pair and stored sparse.
"""

from __future__ import annotations

import enum
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import sparse

from craft.bases import BasisDirection, VectorSpaceWithBasis, join_vector_spaces
from craft.blocks import AttentionHead
from craft.maps import BilinearMap, FactoredBilinearMap, LinearMap, builds_sparse, dyadic_prefix_factors

_ORDER_UFUNCS = {"LT": np.less, "LEQ": np.less_equal, "GT": np.greater, "GEQ": np.greater_equal}
_SPOT_CHECKS = 64


def _object_array(values: Sequence[Any]) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    arr[:] = list(values) if values else []
    return arr


def _as_homogeneous_array(values: list[Any]) -> np.ndarray | None:
    """Values as a float array (all real numbers, exactly representable) or a unicode array
    (all strings); None when neither, so comparisons must go through Python."""
    if all(isinstance(v, numbers.Real) for v in values):
        arr = np.array([float(v) for v in values])
        ints_ok = all(
            not isinstance(v, numbers.Integral) or abs(int(v)) <= 2**53 for v in values
        )
        return arr if ints_ok else None
    if all(isinstance(v, str) for v in values):
        return np.array(values, dtype=str)
    return None


def _fast_table(name: str, keys: list[Any], queries: list[Any]) -> np.ndarray | None:
    """(n_queries, n_keys) boolean table for a standard comparison, or None (no fast path)."""
    if name == "TRUE":
        return np.ones((len(queries), len(keys)), dtype=bool)
    if name == "FALSE":
        return np.zeros((len(queries), len(keys)), dtype=bool)
    if name in ("EQ", "NEQ"):
        codes: dict[Any, int] = {}
        try:
            k = np.array([codes.setdefault(v, len(codes)) for v in keys], dtype=np.int64)
            q = np.array([codes.setdefault(v, len(codes)) for v in queries], dtype=np.int64)
        except TypeError:
            return None
        equal = q[:, None] == k[None, :]
        return equal if name == "EQ" else ~equal
    if name in _ORDER_UFUNCS:
        k_arr = _as_homogeneous_array(keys)
        q_arr = _as_homogeneous_array(queries)
        if k_arr is None or q_arr is None or k_arr.dtype.kind != q_arr.dtype.kind:
            return None
        return _ORDER_UFUNCS[name](k_arr[None, :], q_arr[:, None])
    return None


def _spot_check(table: np.ndarray | sparse.csr_array, predicate: Callable, keys: list, queries: list) -> bool:
    """Compare a fast-path table (dense or sparse) with the predicate on a few deterministic pairs."""
    if table.shape[0] * table.shape[1] == 0:
        return True
    rng = np.random.default_rng(0)
    qi = rng.integers(0, len(queries), _SPOT_CHECKS)
    ki = rng.integers(0, len(keys), _SPOT_CHECKS)
    return all(bool(predicate(keys[k], queries[q])) == bool(table[q, k]) for q, k in zip(qi, ki))


def predicate_table(predicate: Callable[[Any, Any], Any], keys: list[Any], queries: list[Any]) -> np.ndarray:
    """Boolean (n_queries, n_keys) table of predicate(key, query) (None values are never selected).

    Standard comparisons (enum members named EQ, LT, ...) use numpy broadcasting, verified on a
    sample of pairs against the callable; anything else is called once per pair through
    `np.frompyfunc`.
    """
    table = np.zeros((len(queries), len(keys)), dtype=bool)
    k_ok = [i for i, v in enumerate(keys) if v is not None]
    q_ok = [i for i, v in enumerate(queries) if v is not None]
    ks = [keys[i] for i in k_ok]
    qs = [queries[i] for i in q_ok]
    if not ks or not qs:
        return table
    sub = None
    if isinstance(predicate, enum.Enum):
        sub = _fast_table(predicate.name, ks, qs)
        if sub is not None and not _spot_check(sub, predicate, ks, qs):
            sub = None
    if sub is None:
        call = np.frompyfunc(lambda k, q: bool(predicate(k, q)), 2, 1)
        sub = call(_object_array(ks)[None, :], _object_array(qs)[:, None]).astype(bool)
    table[np.ix_(q_ok, k_ok)] = sub
    return table


def _present(values: list[Any]) -> tuple[np.ndarray, list[Any]]:
    """Positions and values of the entries that are not None."""
    where = [i for i, v in enumerate(values) if v is not None]
    return np.array(where, dtype=np.int64), [values[i] for i in where]


def order_prefixes(
    predicate: Callable[[Any, Any], Any], keys: list[Any], queries: list[Any]
) -> tuple[np.ndarray, np.ndarray] | None:
    """`(key order, prefix length per query)` of an order comparison, without the table.

    For LT / LEQ / GT / GEQ (enum members of those names) over keys and queries that are all real
    numbers or all strings, query q selects exactly the first `lengths[q]` keys of `order`
    (ascending for LT / LEQ, descending for GT / GEQ). Checked against the predicate itself on a
    few deterministic pairs; None when it does not apply (the caller builds the table).
    """
    if not isinstance(predicate, enum.Enum) or predicate.name not in _ORDER_UFUNCS or not keys or not queries:
        return None
    k_arr, q_arr = _as_homogeneous_array(keys), _as_homogeneous_array(queries)
    if k_arr is None or q_arr is None or k_arr.dtype.kind != q_arr.dtype.kind:
        return None
    ascending = np.argsort(k_arr, kind="stable")
    ordered = k_arr[ascending]
    m = len(keys)
    if predicate.name == "LT":
        order, lengths = ascending, np.searchsorted(ordered, q_arr, side="left")
    elif predicate.name == "LEQ":
        order, lengths = ascending, np.searchsorted(ordered, q_arr, side="right")
    elif predicate.name == "GT":
        order, lengths = ascending[::-1], m - np.searchsorted(ordered, q_arr, side="right")
    else:  # GEQ
        order, lengths = ascending[::-1], m - np.searchsorted(ordered, q_arr, side="left")
    rank = np.empty(m, dtype=np.int64)
    rank[order] = np.arange(m)
    rng = np.random.default_rng(0)
    for q, k in zip(rng.integers(0, len(queries), _SPOT_CHECKS), rng.integers(0, m, _SPOT_CHECKS)):
        if bool(predicate(keys[k], queries[q])) != bool(rank[k] < lengths[q]):
            return None
    return order, lengths


def _equality_matrix(keys: list[Any], queries: list[Any]) -> sparse.csr_array | None:
    """Sparse 0/1 (queries x keys) matrix of key == query (None: unhashable values)."""
    by_value: dict[Any, list[int]] = {}
    try:
        for k, value in enumerate(keys):
            by_value.setdefault(value, []).append(k)
        pairs = [(q, k) for q, value in enumerate(queries) for k in by_value.get(value, ())]
    except TypeError:
        return None
    rows = np.array([q for q, _ in pairs], dtype=np.int64)
    cols = np.array([k for _, k in pairs], dtype=np.int64)
    return sparse.csr_array((np.ones(rows.size), (rows, cols)), shape=(len(queries), len(keys)))


def _large_selector_qk(
    query_space: VectorSpaceWithBasis,
    key_space: VectorSpaceWithBasis,
    predicate: Callable[[Any, Any], Any],
) -> BilinearMap | FactoredBilinearMap:
    """`selector_qk` without a dense (queries x keys) matrix: factored, or sparse."""
    q_rows, queries = _present([d.value for d in query_space.basis])
    k_rows, keys = _present([d.value for d in key_space.basis])
    shape = (query_space.num_dims, key_space.num_dims)
    prefixes = order_prefixes(predicate, keys, queries)
    if prefixes is not None:
        a, b = dyadic_prefix_factors(*prefixes)
        a = sparse.csr_array((a.data, (q_rows[a.tocoo().row], a.tocoo().col)), shape=(shape[0], a.shape[1]))
        b = sparse.csr_array((b.data, (k_rows[b.tocoo().row], b.tocoo().col)), shape=(shape[1], b.shape[1]))
        return FactoredBilinearMap(query_space, key_space, a, b)
    matches = None
    if isinstance(predicate, enum.Enum) and predicate.name == "EQ":
        matches = _equality_matrix(keys, queries)
        if matches is not None and not _spot_check(matches, predicate, keys, queries):
            matches = None
    if matches is None:
        matches = sparse.csr_array(predicate_table(predicate, keys, queries).astype(np.float64))
    coo = matches.tocoo()
    return BilinearMap(
        query_space, key_space, sparse.csr_array((coo.data, (q_rows[coo.row], k_rows[coo.col])), shape=shape)
    )


def selector_qk(
    query_space: VectorSpaceWithBasis,
    key_space: VectorSpaceWithBasis,
    predicate: Callable[[Any, Any], Any],
) -> BilinearMap | FactoredBilinearMap:
    """The 0/1 direct attention matrix: entry [query v, key w] = predicate(w, v).

    Dense up to `craft.maps.SPARSE_ABOVE` entries; larger ones factored or sparse (module doc).
    """
    if builds_sparse(query_space.num_dims, key_space.num_dims):
        return _large_selector_qk(query_space, key_space, predicate)
    queries = [d.value for d in query_space.basis]
    keys = [d.value for d in key_space.basis]
    table = predicate_table(predicate, keys, queries)
    return BilinearMap(query_space, key_space, table.astype(np.float64))


def selects_absent_qk(
    query_space: VectorSpaceWithBasis,
    key_space: VectorSpaceWithBasis,
    predicate: Callable[[Any, Any], Any],
    one: BasisDirection,
    bos: BasisDirection,
) -> BilinearMap | FactoredBilinearMap:
    """Like `selector_qk`, but a query or key whose one-hot is empty (None) scores 1 too.

    The score is (one - bos)_q (one - bos)_k - [not predicate(w, v)] q_v k_w: 1 at every pair of
    real positions, minus 1 where both values are present and the predicate fails. `one - bos`
    is 0 at BOS, so BOS (as query or key) scores 0, as in `selector_qk`.
    """
    failing = selector_qk(query_space, key_space, lambda key, query: not predicate(key, query))
    real_q = VectorSpaceWithBasis((one, bos))
    everything = BilinearMap(real_q, real_q, np.array([[1.0, -1.0], [-1.0, 1.0]]))
    return everything + failing * -1.0


def attention_head(
    direct_qk: BilinearMap | FactoredBilinearMap,
    n_terms: int,
    value_to_output: LinearMap,
    bos_space: VectorSpaceWithBasis,
    one_space: VectorSpaceWithBasis,
    causal: bool = False,
    always_attend_to_bos: bool = False,
    coldness: float = 100.0,
) -> AttentionHead:
    """Head attending (uniformly) to keys scoring n_terms in `direct_qk`, else to BOS."""
    if bos_space.num_dims != 1 or one_space.num_dims != 1:
        raise ValueError("bos_space and one_space must each have exactly one direction")
    bos_weight = float(n_terms) if always_attend_to_bos else n_terms - 0.5
    if isinstance(direct_qk, FactoredBilinearMap) or sparse.issparse(direct_qk.matrix):
        bos_term = BilinearMap(one_space, bos_space, np.full((1, 1), bos_weight))
        return AttentionHead((direct_qk + bos_term) * coldness, value_to_output, causal=causal)
    left = join_vector_spaces(direct_qk.left_space, one_space)
    right = join_vector_spaces(direct_qk.right_space, bos_space)
    matrix = direct_qk.on_spaces(left, right).matrix.copy()
    matrix[left.index(one_space.basis[0]), right.index(bos_space.basis[0])] += bos_weight
    return AttentionHead(BilinearMap(left, right, coldness * matrix), value_to_output, causal=causal)


def categorical_value_map(
    value_space: VectorSpaceWithBasis, output_space: VectorSpaceWithBasis
) -> LinearMap:
    """W_OV copying a one-hot: (value label, v) -> (output label, v); values missing from the
    output space are dropped."""
    name = output_space.basis[0].name if output_space.num_dims else ""
    shape = (value_space.num_dims, output_space.num_dims)
    rows, cols = [], []
    for i, d in enumerate(value_space.basis):
        target = BasisDirection(name, d.value)
        if target in output_space:
            rows.append(i)
            cols.append(output_space.index(target))
    if builds_sparse(*shape):
        return LinearMap(value_space, output_space, sparse.csr_array((np.ones(len(rows)), (rows, cols)), shape=shape))
    matrix = np.zeros(shape)
    matrix[rows, cols] = 1.0
    return LinearMap(value_space, output_space, matrix)


def numerical_value_map(
    value_space: VectorSpaceWithBasis, output_space: VectorSpaceWithBasis
) -> LinearMap:
    """W_OV writing a number onto the single output direction.

    A valueless (numerical) input direction is copied with weight 1; a categorical direction
    (label, v) with a numeric v writes v, so attention yields the mean of the selected values.
    """
    if output_space.num_dims != 1:
        raise ValueError("numerical_value_map: output space must have exactly one direction")
    weights = np.zeros((value_space.num_dims, 1))
    for i, d in enumerate(value_space.basis):
        if d.value is None:
            weights[i, 0] = 1.0
        elif isinstance(d.value, numbers.Real):
            weights[i, 0] = float(d.value)
        else:
            raise ValueError(
                f"numerical_value_map: direction {d} has non-numeric value {d.value!r}; "
                "a numerical aggregate needs numbers"
            )
    return LinearMap(value_space, output_space, weights)


def bos_default_heads(
    head: AttentionHead,
    default_row: np.ndarray,
    bos_space: VectorSpaceWithBasis,
    one_space: VectorSpaceWithBasis,
    coldness: float = 100.0,
) -> tuple[AttentionHead, AttentionHead]:
    """`head` whose BOS key carries the default, and a head cancelling it at the BOS query.

    A query that selects nothing attends to BOS, so giving the BOS key the value `default_row`
    (a row over `head`'s output space: the default number, or the default's one-hot) makes the
    head write the Aggregate's default exactly there; a query that selects something weighs BOS
    by at most e^-(coldness/2). The BOS query itself also attends to BOS, so the second head,
    which attends to BOS only from the BOS query (query `tokens:BOS` x key `tokens:BOS` scores
    2 coldness, `one` x key `tokens:BOS` -coldness; every other query attends to the non-BOS keys,
    whose values it ignores), writes -`default_row` there: the residual keeps 0 at BOS.
    """
    bos = bos_space.basis[0]
    out_space = head.w_ov.output_space
    value_space = join_vector_spaces(head.w_ov.input_space, bos_space)
    matrix = head.w_ov.on_spaces(value_space, out_space).matrix.copy()
    if sparse.issparse(matrix):
        row = sparse.csr_array(np.asarray(default_row, dtype=np.float64)[None, :])
        shift = sparse.csr_array(
            (row.data, (np.full(row.nnz, value_space.index(bos)), row.indices)), shape=matrix.shape
        )
        matrix = matrix + shift
    else:
        matrix[value_space.index(bos)] += default_row
    with_default = AttentionHead(head.w_qk, LinearMap(value_space, out_space, matrix), causal=head.causal)
    query = join_vector_spaces(bos_space, one_space)
    scores = np.zeros((2, 1))
    scores[query.index(bos), 0] = 2.0 * coldness
    scores[query.index(one_space.basis[0]), 0] = -coldness
    cancel = AttentionHead(
        BilinearMap(query, bos_space, scores),
        LinearMap(bos_space, out_space, -np.asarray(default_row, dtype=np.float64)[None, :]),
        causal=head.causal,
    )
    return with_default, cancel
