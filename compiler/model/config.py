"""The compiled model's configuration records: shapes, sparsity patterns, labels and flags.

Everything here is numpy only, so `compiler.model.assemble` can produce a
`ModelConfig` and its weights without JAX. The Haiku module that runs them is
`compiler.model.transformer`; `SparseLinear` below records a weight's storage, layout and
*form* (how the forward pass applies it, chosen by `compiler.model.forms`), and
`compiler.model.transformer.apply_linear` applies it.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
from scipy import sparse

# Haiku module name of the compiled transformer: parameters are `MODULE_NAME/<part>`.
MODULE_NAME = "compiled_transformer"

# Logit given to masked keys (padding, future positions). Finite, so a fully masked row cannot
# produce NaN; far below any compiled logit.
MASKED_LOGIT = -1e30

# A matrix is stored dense when at least this fraction of its entries is non-zero. A sparse
# entry costs three numbers (its value, row and column), so sparse storage only pays below 1/3.
DENSE_FRACTION = 1 / 3

# A sparse matrix is applied column-wise ("ELL" layout, see
# `compiler.model.transformer.apply_linear`) when padding
# every output column to the fullest one costs at most this factor over its non-zero count;
# otherwise it is rebuilt densely (its own size, independent of batch and length) for a matmul.
ELL_PADDING = 4

# How a weight is applied in the forward pass (`SparseLinear.form`); every form computes the same
# product `x @ M`, they differ in cost (`compiler.model.forms` picks one per weight and backend):
# - "dense": the parameter is `M` itself, one matmul;
# - "rebuild": `M` is rebuilt densely from its non-zeros on each call, then one matmul;
# - "columns": per output column, gather its inputs (ELL layout, `SparseLinear.ell`);
# - "rows": per input row, scatter-add into its outputs (`SparseLinear.row_ell`);
# - "interval": permute the inputs so that every column's non-zeros are one contiguous run with
#   one value, take prefix sums, and read each column as a difference of two of them
#   (`SparseLinear.interval`); linear in the input like every other form.
FORMS = ("dense", "rebuild", "columns", "rows", "interval")


# An index tuple made of at most this many runs of consecutive coordinates is read and written
# with slices (`index_runs`); more runs use one gather or scatter-add.
MAX_RUNS = 8


def index_runs(idx: tuple[int, ...] | None) -> tuple[tuple[int, int, int], ...] | None:
    """`idx` as `(start in idx, first coordinate, length)` runs of consecutive coordinates, or
    `None` when `idx` is `None` or needs more than `MAX_RUNS` runs.

    The residual layout keeps each s-op's directions together, so a weight reads and writes a few
    runs: slices of the stream, which XLA updates in place, where a scatter-add into a
    `[batch, T, D]` array costs a pass over all of it.
    """
    if idx is None or len(idx) == 0:
        return None
    coords = np.asarray(idx, dtype=np.int64)
    breaks = np.flatnonzero(np.diff(coords) != 1) + 1
    if len(breaks) + 1 > MAX_RUNS:
        return None
    starts = np.concatenate(([0], breaks))
    stops = np.concatenate((breaks, [len(coords)]))
    return tuple((int(a), int(coords[a]), int(b - a)) for a, b in zip(starts, stops))


EMBED, UNEMBED, LAYER_PREFIX = "embed", "unembed", "layer_"
MLP_IN, MLP_OUT = "w_in", "w_out"


def layer_module(index: int) -> str:
    """The parameter module of sub-layer ``index``."""
    return f"{LAYER_PREFIX}{index}"


class ParamKey(NamedTuple):
    """Where a weight lives among the model's parameters: ``(module, name)``, e.g.
    ``("layer_3", "w_out")`` or ``("layer_0", "head_1_q")``. The model package spells these keys;
    other code reads them through this record (it equals the plain tuple)."""

    module: str
    name: str

    @property
    def sublayer(self) -> int | None:
        """The sub-layer the weight belongs to (None for the embedding and the unembedding)."""
        return int(self.module.removeprefix(LAYER_PREFIX)) if self.module.startswith(LAYER_PREFIX) else None

    @property
    def writes_residual(self) -> bool:
        """Whether the weight's outputs are residual coordinates (the embedding tables, a head's
        output map, an MLP's output) rather than its inputs."""
        return self.module == EMBED or self.name.endswith("_o") or self.name == MLP_OUT


@dataclasses.dataclass(frozen=True)
class SparseLinear:
    """`y[out_idx] += x[in_idx] @ M` with `M` of shape `(len(in_idx), len(out_idx))`.

    `in_idx` / `out_idx` of `None` mean "all coordinates" (the input or output is exactly the
    matrix's size). `rows`/`cols` give the non-zero pattern when `M` is stored sparsely; then the
    parameter is the vector of those entries, else it is `M` itself. `form` (one of `FORMS`) says
    how the forward pass applies it; `None` (hand-built specs, files written before forms were
    recorded) means `default_form`. The record holds the storage and its numpy layouts;
    `compiler.model.transformer.apply_linear` applies it in JAX.
    """

    shape: tuple[int, int]
    in_idx: tuple[int, ...] | None = None
    out_idx: tuple[int, ...] | None = None
    rows: tuple[int, ...] | None = None
    cols: tuple[int, ...] | None = None
    form: str | None = None

    def __post_init__(self) -> None:
        if self.form is not None and self.form not in self.possible_forms:
            raise ValueError(
                f"weight form {self.form!r} is not one of {self.possible_forms} for a "
                f"{'sparse' if self.is_sparse else 'dense'} {self.shape} weight"
            )

    @property
    def possible_forms(self) -> tuple[str, ...]:
        """The forms this storage allows: dense storage only `dense`; sparse all but `dense`."""
        return FORMS[1:] if self.is_sparse else ("dense",)

    @property
    def default_form(self) -> str:
        """The form used when none is recorded: columns or rows when their padding wastes at most
        `ELL_PADDING` times the non-zeros, else a dense rebuild (never `interval`, which needs
        the values checked, see `compiler.model.forms`)."""
        if not self.is_sparse:
            return "dense"
        return "columns" if self.column_wise else "rows" if self.row_wise else "rebuild"

    @property
    def applied_form(self) -> str:
        """The form the forward pass uses."""
        return self.default_form if self.form is None else self.form

    @property
    def is_sparse(self) -> bool:
        return self.rows is not None

    @property
    def nnz(self) -> int:
        """Stored entries: the non-zeros of a sparse weight, every entry of a dense one."""
        return len(self.rows) if self.rows is not None else self.shape[0] * self.shape[1]

    @staticmethod
    def from_matrix(
        matrix: np.ndarray,
        in_idx: tuple[int, ...] | None = None,
        out_idx: tuple[int, ...] | None = None,
    ) -> tuple[SparseLinear, np.ndarray]:
        """Choose the storage for `matrix` (numpy or scipy.sparse); returns the spec and the
        parameter array. A sparse input is never made dense unless dense storage is chosen."""
        if sparse.issparse(matrix):
            return SparseLinear._from_sparse(matrix, in_idx, out_idx)
        matrix = np.asarray(matrix, dtype=np.float32)
        nonzero = np.nonzero(matrix)
        count = len(nonzero[0])
        if count >= DENSE_FRACTION * matrix.size:
            return SparseLinear(matrix.shape, in_idx, out_idx), matrix
        rows, cols = (tuple(axis.tolist()) for axis in nonzero)
        spec = SparseLinear(matrix.shape, in_idx, out_idx, rows, cols)
        return spec, matrix[nonzero]

    # numpy copies of the index tuples, built once per spec: turning a tuple of millions of
    # Python ints into a device constant on every trace dominated the first forward call.
    @staticmethod
    def _from_sparse(matrix, in_idx, out_idx) -> tuple[SparseLinear, np.ndarray]:
        coo = sparse.coo_array(matrix)
        values = coo.data.astype(np.float32)
        keep = values != 0
        rows, cols, values = coo.row[keep], coo.col[keep], values[keep]
        order = np.lexsort((cols, rows))  # row-major, as np.nonzero gives for a dense matrix
        shape = (int(matrix.shape[0]), int(matrix.shape[1]))
        if values.size >= DENSE_FRACTION * shape[0] * shape[1]:
            return SparseLinear.from_matrix(sparse.csr_array(matrix).toarray(), in_idx, out_idx)
        spec = SparseLinear(shape, in_idx, out_idx, tuple(rows[order].tolist()), tuple(cols[order].tolist()))
        return spec, values[order]

    @functools.cached_property
    def in_array(self) -> np.ndarray | None:
        return None if self.in_idx is None else np.asarray(self.in_idx, dtype=np.int32)

    @functools.cached_property
    def out_array(self) -> np.ndarray | None:
        return None if self.out_idx is None else np.asarray(self.out_idx, dtype=np.int32)

    @functools.cached_property
    def pattern(self) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(self.rows, dtype=np.int32), np.asarray(self.cols, dtype=np.int32)

    @functools.cached_property
    def ell(self) -> tuple[np.ndarray, np.ndarray]:
        """`(rows, entries)`, both `[K, out]`: step `t` adds `x[rows[t]] * param[entries[t]]` to
        every output column; K is the largest column count, shorter columns point at a zero
        appended to the parameter vector (entry `nnz`)."""
        rows, cols = self.pattern
        count = np.bincount(cols, minlength=self.shape[1])
        steps = int(count.max(initial=0))
        order = np.argsort(cols, kind="stable")
        starts = np.concatenate(([0], np.cumsum(count)[:-1]))
        rank = np.arange(len(cols)) - starts[cols[order]]
        ell_rows = np.zeros((steps, self.shape[1]), dtype=np.int32)
        entries = np.full((steps, self.shape[1]), len(cols), dtype=np.int32)
        ell_rows[rank, cols[order]] = rows[order]
        entries[rank, cols[order]] = order
        return ell_rows, entries

    @functools.cached_property
    def row_ell(self) -> tuple[np.ndarray, np.ndarray]:
        """`(cols, entries)`, both `[K, in]`: the transpose's ELL layout (step `t` scatters
        `x[r] * param[entries[t, r]]` into column `cols[t, r]`)."""
        rows, cols = self.pattern
        transposed = SparseLinear(self.shape[::-1], rows=tuple(cols.tolist()), cols=tuple(rows.tolist()))
        return transposed.ell

    @functools.cached_property
    def interval(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """`(perm, lo, hi, entry)` when the rows can be ordered so that every column's non-zeros
        are contiguous, else `None`. `perm` lists the rows that hold a non-zero in that order;
        column `j`'s non-zeros are rows `perm[lo[j]:hi[j]]` and `entry[j]` is the index of one
        of them in the parameter vector (`nnz`, pointing at an appended zero, for an empty
        column). Whether the values are one per column is checked where the values are known
        (`compiler.model.forms.one_value_per_column`).

        The order tried sorts each row by the columns it belongs to, largest column first: for
        a laminar family of columns (any two nested or disjoint: dyadic blocks, staircases,
        one-hot tables) that is a depth-first order, in which every column is contiguous.
        """
        if not self.is_sparse:
            return None
        rows, cols = self.pattern
        sizes = np.bincount(cols, minlength=self.shape[1])
        rank = np.lexsort((np.arange(self.shape[1]), -sizes))  # columns, largest first
        position = np.empty_like(rank)
        position[rank] = np.arange(len(rank))
        by_row: dict[int, list[int]] = {}
        for row, col_position in zip(rows.tolist(), position[cols].tolist()):
            by_row.setdefault(row, []).append(col_position)
        perm = np.asarray(sorted(by_row, key=lambda row: sorted(by_row[row])), dtype=np.int32)
        where = np.empty(self.shape[0], dtype=np.int64)
        where[perm] = np.arange(len(perm))
        placed = where[rows]
        lo = np.full(self.shape[1], len(perm), dtype=np.int64)
        hi = np.zeros(self.shape[1], dtype=np.int64)
        np.minimum.at(lo, cols, placed)
        np.maximum.at(hi, cols, placed + 1)
        if not np.array_equal(np.maximum(hi - lo, 0), sizes):
            return None
        empty = sizes == 0
        lo[empty] = hi[empty] = 0
        entry = np.full(self.shape[1], len(rows), dtype=np.int32)
        entry[cols[::-1]] = np.arange(len(rows) - 1, -1, -1, dtype=np.int32)  # first entry per column
        return perm, lo.astype(np.int32), hi.astype(np.int32), entry

    @functools.cached_property
    def in_runs(self) -> tuple[tuple[int, int, int], ...] | None:
        """`in_idx` as runs of consecutive coordinates (see `index_runs`)."""
        return index_runs(self.in_idx)

    @functools.cached_property
    def out_runs(self) -> tuple[tuple[int, int, int], ...] | None:
        """`out_idx` as runs of consecutive coordinates (see `index_runs`)."""
        return index_runs(self.out_idx)

    def padded_work(self, axis: int) -> int:
        """Multiply-adds per token of the ELL layout along `axis` (1: columns, 0: rows)."""
        counts = np.bincount(self.pattern[axis], minlength=self.shape[axis])
        return int(counts.max(initial=0)) * self.shape[axis]

    @property
    def column_wise(self) -> bool:
        """Whether the forward pass gathers per output column (ELL)."""
        if not self.is_sparse:
            return False
        work = self.padded_work(1)
        return work <= ELL_PADDING * self.nnz and work <= self.padded_work(0)

    @property
    def row_wise(self) -> bool:
        """Whether the forward pass scatters per input row (ELL of the transpose)."""
        if not self.is_sparse or self.column_wise:
            return False
        return self.padded_work(0) <= ELL_PADDING * self.nnz

    def dense(self, param: np.ndarray) -> np.ndarray:
        """The matrix `M` as a dense numpy array."""
        param = np.asarray(param)
        if not self.is_sparse:
            return param
        matrix = np.zeros(self.shape, dtype=param.dtype)
        matrix[self.pattern] = param
        return matrix

    def full_matrix(self, param: np.ndarray, in_width: int, out_width: int) -> np.ndarray:
        """`M` embedded into an `(in_width, out_width)` matrix over all coordinates."""
        matrix = np.zeros((in_width, out_width), dtype=np.float32)
        # An empty index tuple must still be an integer array (np.array(()) is float64).
        rows = np.arange(self.shape[0]) if self.in_idx is None else np.asarray(self.in_idx, dtype=np.intp)
        cols = np.arange(self.shape[1]) if self.out_idx is None else np.asarray(self.out_idx, dtype=np.intp)
        matrix[np.ix_(rows, cols)] = self.dense(param)
        return matrix


@dataclasses.dataclass(frozen=True)
class HeadSpec:
    """One attention head: query/key maps into a shared width, value/output maps."""

    w_q: SparseLinear
    w_k: SparseLinear
    w_v: SparseLinear
    w_o: SparseLinear

    @functools.cached_property
    def shared_interval(self) -> tuple[np.ndarray, tuple[np.ndarray, ...], tuple[np.ndarray, ...]] | None:
        """`(coordinates, (lo, hi, entry) of w_q, (lo, hi, entry) of w_k)` when `w_q` and `w_k`
        both apply in the `interval` form and one order of the residual coordinates either reads
        makes every column of both one contiguous run; else None. `coordinates` are the residual
        coordinates in that order, `lo`/`hi` index the prefix sums over them and `entry` each
        weight's own parameter vector (its length: an appended zero).

        The forward pass then gathers and prefix-sums the input once for both. An order
        comparison over one s-op (sort's `keys < keys`) always has such an order: its dyadic
        factors are aligned power-of-two blocks of the sorted values, on the key side the keys of
        a block and on the query side the queries that use it, and any two aligned blocks are
        nested or disjoint, so the depth-first order of `SparseLinear.interval` fits both.
        """
        q, k = self.w_q, self.w_k
        if q.applied_form != "interval" or k.applied_form != "interval" or q.out_idx is not None or k.out_idx is not None:
            return None
        if q.in_idx is None or k.in_idx is None:
            return None
        union = np.union1d(np.asarray(q.in_idx, dtype=np.int64), np.asarray(k.in_idx, dtype=np.int64))
        rows, cols = [], []
        for offset, spec in ((0, q), (q.shape[1], k)):
            spec_rows, spec_cols = spec.pattern
            rows.append(np.searchsorted(union, np.asarray(spec.in_idx, dtype=np.int64)[spec_rows]))
            cols.append(spec_cols.astype(np.int64) + offset)
        both = SparseLinear((len(union), q.shape[1] + k.shape[1]), rows=tuple(np.concatenate(rows).tolist()),
                            cols=tuple(np.concatenate(cols).tolist()))
        found = both.interval
        if found is None:
            return None
        perm, lo, hi, entry = found
        nnz_q, nnz_k = q.nnz, k.nnz
        split = q.shape[1]
        entry_q = np.minimum(entry[:split], nnz_q).astype(np.int32)  # an empty column: the appended zero
        entry_k = np.where(entry[split:] >= nnz_q + nnz_k, nnz_k, entry[split:] - nnz_q).astype(np.int32)
        return union[perm].astype(np.int32), (lo[:split], hi[:split], entry_q), (lo[split:], hi[split:], entry_k)


@dataclasses.dataclass(frozen=True)
class AttentionSpec:
    heads: tuple[HeadSpec, ...]
    kind: str = "attention"


@dataclasses.dataclass(frozen=True)
class MLPSpec:
    w_in: SparseLinear
    w_out: SparseLinear
    activation: str = "relu"
    kind: str = "mlp"


LayerSpec = AttentionSpec | MLPSpec


@dataclasses.dataclass(frozen=True)
class TiedBlock:
    """Sub-layers `start .. stop - 1` of `ModelConfig.layers`, run `repeats` times in a row with
    the same weights (a compiled `rasp.Loop`: one copy of the block is stored)."""

    start: int
    stop: int
    repeats: int

    def __post_init__(self) -> None:
        if not (0 <= self.start < self.stop and self.start % 2 == 0 and self.stop % 2 == 0 and self.repeats >= 1):
            raise ValueError(
                f"a tied block spans whole layers (even start < even stop) and runs at least once, got {self}"
            )


# The normalisations a model may run before every sub-layer and before the unembedding.
NORMS = ("layernorm", "rmsnorm")


@dataclasses.dataclass(frozen=True)
class NormSpec:
    """A pre-norm before every sub-layer and before the unembedding, the same at every site.

    Each site computes `n(x) * scale` over the whole residual stream, with `n` the plain
    LayerNorm `(x - mean(x)) / sqrt(var(x) + eps)` or RMSNorm `x / sqrt(mean(x^2) + eps)` and
    one gain, `scale`, for every coordinate (no bias). The compiler writes a constant anchor of
    magnitude `anchor` into the stream (and, for LayerNorm, gives every reader a row on an always-zero
    coordinate that makes it blind to the stream's mean), so that `sqrt(var(x) + eps)` stays within a
    factor `1 +- spread` of `scale` at every position of every input: each sub-layer reads its
    input scaled by a factor in `[1 - spread, 1 + spread]` (`compiler.model.norm`,
    docs/compiling.md).
    """

    kind: str  # one of NORMS
    scale: float  # the gain of every norm site
    eps: float
    anchor: float  # magnitude of the anchor coordinates
    spread: float  # worst |scale / sqrt(var(x) + eps) - 1| over every reachable residual vector
    budget: float = float("nan")  # the bound on the other coordinates' squared size it was sized by

    def __post_init__(self) -> None:
        if self.kind not in NORMS:
            raise ValueError(f"norm kind {self.kind!r} is not one of {NORMS}")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Everything but the weights' values: shapes, sparsity patterns, labels, flags."""

    residual_labels: tuple[str, ...]
    layers: tuple[LayerSpec, ...]
    token_embed: SparseLinear
    pos_embed: SparseLinear
    unembed: SparseLinear
    vocab_size: int  # number of token ids, BOS and PAD included
    max_seq_len: int  # without BOS
    pad_id: int
    causal: bool
    numerical_output: bool
    # The backend (`jax.default_backend()`: "cpu", "gpu", "tpu") the weights' forms were chosen
    # for; `None` when no form was chosen (older files, hand-built configs).
    backend: str | None = None
    # Sub-layers that run several times with shared weights (a compiled loop), else None.
    tied: TiedBlock | None = None
    # The pre-norm of every sub-layer and of the unembedding; None: no normalisation.
    norm: NormSpec | None = None

    @property
    def layer_order(self) -> tuple[int, ...]:
        """The indices into `layers` in the order the forward pass runs them (a tied block's
        sub-layers once per repeat)."""
        if self.tied is None:
            return tuple(range(len(self.layers)))
        start, stop = self.tied.start, self.tied.stop
        return (*range(start), *(tuple(range(start, stop)) * self.tied.repeats), *range(stop, len(self.layers)))

    @property
    def num_executed_layers(self) -> int:
        """Transformer layers the forward pass runs (a tied block counted once per repeat)."""
        return (len(self.layer_order) + 1) // 2

    def linears(self) -> dict[ParamKey, SparseLinear]:
        """Every weight's spec under its parameter key, in model order."""
        found = {ParamKey(EMBED, "token"): self.token_embed, ParamKey(EMBED, "position"): self.pos_embed}
        for index, layer in enumerate(self.layers):
            module = layer_module(index)
            if isinstance(layer, AttentionSpec):
                for h, head in enumerate(layer.heads):
                    for part in "qkvo":
                        found[ParamKey(module, f"head_{h}_{part}")] = getattr(head, f"w_{part}")
            else:
                found[ParamKey(module, MLP_IN)], found[ParamKey(module, MLP_OUT)] = layer.w_in, layer.w_out
        found[ParamKey(UNEMBED, "w_u")] = self.unembed
        return found

    def with_linears(self, specs: Mapping[ParamKey, SparseLinear], backend: str | None) -> ModelConfig:
        """This config with the weights of `specs` (keyed as `linears`) replaced."""
        def pick(module: str, name: str, current: SparseLinear) -> SparseLinear:
            return specs.get(ParamKey(module, name), current)

        layers: list[LayerSpec] = []
        for index, layer in enumerate(self.layers):
            module = f"layer_{index}"
            if isinstance(layer, AttentionSpec):
                heads = tuple(
                    HeadSpec(*(pick(module, f"head_{h}_{part}", getattr(head, f"w_{part}")) for part in "qkvo"))
                    for h, head in enumerate(layer.heads)
                )
                layers.append(dataclasses.replace(layer, heads=heads))
            else:
                layers.append(
                    dataclasses.replace(layer, w_in=pick(module, "w_in", layer.w_in), w_out=pick(module, "w_out", layer.w_out))
                )
        return dataclasses.replace(
            self,
            layers=tuple(layers),
            token_embed=pick("embed", "token", self.token_embed),
            pos_embed=pick("embed", "position", self.pos_embed),
            unembed=pick("unembed", "w_u", self.unembed),
            backend=backend,
        )

    @property
    def residual_width(self) -> int:
        return len(self.residual_labels)

    @property
    def num_layers(self) -> int:
        """Transformer layers (one attention and one MLP sub-layer each)."""
        return (len(self.layers) + 1) // 2
