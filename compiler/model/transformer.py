"""The compiled transformer as a Haiku model.

A decoder-only transformer without layer norm: token and position embeddings, alternating
attention and MLP sub-layers that add into the residual stream, and an unembedding of the output
s-op. Sizes are per layer (each attention layer has its own heads, each MLP its own width and
activation): nothing is padded to the widest layer.

Compiled weights are sparse: a head reads a few residual directions, a lookup-table MLP is close
to a permutation. Every weight is therefore a `SparseLinear`: it gathers the input coordinates it
reads, multiplies by a matrix that is stored dense when at least a third of its entries are
non-zero and as its non-zero values otherwise, and scatters into the output coordinates it
writes. A sparse matrix is applied column by column in an ELL layout (one gathered input per
output column and step, as many steps as the fullest column) when that wastes at most
`ELL_PADDING` times its non-zeros, else row by row (scatter-adds) on the same condition for
rows, else rebuilt inside the forward pass for one dense matmul over
the block's own coordinates. No `batch x length x non-zeros` array is ever formed: memory is a
few activations plus the block's own size, and ELL time is linear in the non-zeros. The
parameter count tracks the non-zero count; exporters densify (`SparseLinear.dense`).

Matrix products run at float32 precision (`Precision.HIGHEST`): reduced-precision defaults on
accelerators (TF32, bf16 passes) would break the exactness of compiled programs.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
from scipy import sparse

from craft.blocks import activate

PRECISION = jax.lax.Precision.HIGHEST

# Logit given to masked keys (padding, future positions). Finite, so a fully masked row cannot
# produce NaN; far below any compiled logit.
MASKED_LOGIT = -1e30

# A matrix is stored dense when at least this fraction of its entries is non-zero. A sparse
# entry costs three numbers (its value, row and column), so sparse storage only pays below 1/3.
DENSE_FRACTION = 1 / 3

# A sparse matrix is applied column-wise ("ELL" layout, see `SparseLinear.__call__`) when padding
# every output column to the fullest one costs at most this factor over its non-zero count;
# otherwise it is rebuilt densely (its own size, independent of batch and length) for a matmul.
ELL_PADDING = 4

# Up to this many ELL steps are unrolled; more run in a `lax.fori_loop`.
UNROLL_STEPS = 8


@dataclasses.dataclass(frozen=True)
class SparseLinear:
    """`y[out_idx] += x[in_idx] @ M` with `M` of shape `(len(in_idx), len(out_idx))`.

    `in_idx` / `out_idx` of `None` mean "all coordinates" (the input or output is exactly the
    matrix's size). `rows`/`cols` give the non-zero pattern when `M` is stored sparsely; then the
    parameter is the vector of those entries, else it is `M` itself.
    """

    shape: tuple[int, int]
    in_idx: tuple[int, ...] | None = None
    out_idx: tuple[int, ...] | None = None
    rows: tuple[int, ...] | None = None
    cols: tuple[int, ...] | None = None

    @property
    def is_sparse(self) -> bool:
        return self.rows is not None

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

    @staticmethod
    def _from_sparse(matrix, in_idx, out_idx) -> tuple[SparseLinear, np.ndarray]:
        coo = sparse.coo_array(matrix)
        values = coo.data.astype(np.float32)
        keep = values != 0
        rows, cols, values = coo.row[keep], coo.col[keep], values[keep]
        order = np.lexsort((cols, rows))  # row-major, as np.nonzero gives for a dense matrix
        shape = tuple(int(n) for n in matrix.shape)
        if values.size >= DENSE_FRACTION * shape[0] * shape[1]:
            return SparseLinear.from_matrix(sparse.csr_array(matrix).toarray(), in_idx, out_idx)
        spec = SparseLinear(shape, in_idx, out_idx, tuple(rows[order].tolist()), tuple(cols[order].tolist()))
        return spec, values[order]

    # numpy copies of the index tuples, built once per spec: turning a tuple of millions of
    # Python ints into a device constant on every trace dominated the first forward call.
    @functools.cached_property
    def _in_array(self) -> np.ndarray | None:
        return None if self.in_idx is None else np.asarray(self.in_idx, dtype=np.int32)

    @functools.cached_property
    def _out_array(self) -> np.ndarray | None:
        return None if self.out_idx is None else np.asarray(self.out_idx, dtype=np.int32)

    @functools.cached_property
    def _pattern(self) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(self.rows, dtype=np.int32), np.asarray(self.cols, dtype=np.int32)

    @functools.cached_property
    def _ell(self) -> tuple[np.ndarray, np.ndarray]:
        """`(rows, entries)`, both `[K, out]`: step `t` adds `x[rows[t]] * param[entries[t]]` to
        every output column; K is the largest column count, shorter columns point at a zero
        appended to the parameter vector (entry `nnz`)."""
        rows, cols = self._pattern
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
    def _row_ell(self) -> tuple[np.ndarray, np.ndarray]:
        """`(cols, entries)`, both `[K, in]`: the transpose's ELL layout (step `t` scatters
        `x[r] * param[entries[t, r]]` into column `cols[t, r]`)."""
        rows, cols = self._pattern
        transposed = SparseLinear(self.shape[::-1], rows=tuple(cols.tolist()), cols=tuple(rows.tolist()))
        return transposed._ell

    def _padded_work(self, axis: int) -> int:
        """Multiply-adds per token of the ELL layout along `axis` (1: columns, 0: rows)."""
        counts = np.bincount(self._pattern[axis], minlength=self.shape[axis])
        return int(counts.max(initial=0)) * self.shape[axis]

    @property
    def column_wise(self) -> bool:
        """Whether the forward pass gathers per output column (ELL)."""
        if not self.is_sparse:
            return False
        work = self._padded_work(1)
        return work <= ELL_PADDING * len(self.rows) and work <= self._padded_work(0)

    @property
    def row_wise(self) -> bool:
        """Whether the forward pass scatters per input row (ELL of the transpose)."""
        if not self.is_sparse or self.column_wise:
            return False
        return self._padded_work(0) <= ELL_PADDING * len(self.rows)

    def dense(self, param: np.ndarray) -> np.ndarray:
        """The matrix `M` as a dense numpy array."""
        param = np.asarray(param)
        if not self.is_sparse:
            return param
        matrix = np.zeros(self.shape, dtype=param.dtype)
        matrix[list(self.rows), list(self.cols)] = param
        return matrix

    def full_matrix(self, param: np.ndarray, in_width: int, out_width: int) -> np.ndarray:
        """`M` embedded into an `(in_width, out_width)` matrix over all coordinates."""
        matrix = np.zeros((in_width, out_width), dtype=np.float32)
        rows = np.arange(self.shape[0]) if self.in_idx is None else np.array(self.in_idx)
        cols = np.arange(self.shape[1]) if self.out_idx is None else np.array(self.out_idx)
        matrix[np.ix_(rows, cols)] = self.dense(param)
        return matrix

    def __call__(self, param: jax.Array, x: jax.Array, out_width: int | None = None) -> jax.Array:
        """Apply to `x[..., in]`, never forming a `[..., non-zeros]` array.

        Column-wise (ELL): for each step `t < K`, gather one input per output column and
        multiply-add, so the work is `K * out <= ELL_PADDING * nnz` per token and the memory one
        output-sized array. Row-wise, when the rows are the even side: scatter-add one scaled
        input row per step. Otherwise the matrix is rebuilt densely once per call (its own size,
        independent of batch and length) for one matmul.
        """
        if self._in_array is not None:
            x = jnp.take(x, self._in_array, axis=-1)
        if not self.is_sparse:
            y = jnp.einsum("...i,io->...o", x, param, precision=PRECISION)
        elif self.column_wise:
            y = self._apply_ell(param, x)
        elif self.row_wise:
            y = self._apply_row_ell(param, x)
        else:
            rows, cols = self._pattern
            matrix = jnp.zeros(self.shape, param.dtype).at[rows, cols].set(param)
            y = jnp.einsum("...i,io->...o", x, matrix, precision=PRECISION)
        if self._out_array is None:
            return y
        assert out_width is not None, "a scattered output needs its width"
        return jnp.zeros(y.shape[:-1] + (out_width,), y.dtype).at[..., self._out_array].add(y)

    def _apply_ell(self, param: jax.Array, x: jax.Array) -> jax.Array:
        ell_rows, entries = self._ell
        padded = jnp.concatenate([param, jnp.zeros((1,), param.dtype)])
        values = padded[jnp.asarray(entries)]  # [K, out]
        y = jnp.zeros(x.shape[:-1] + (self.shape[1],), x.dtype)
        if len(ell_rows) <= UNROLL_STEPS:
            for step in range(len(ell_rows)):
                y = y + jnp.take(x, jnp.asarray(ell_rows[step]), axis=-1) * values[step]
            return y
        rows = jnp.asarray(ell_rows)

        def add_step(step: int, acc: jax.Array) -> jax.Array:
            return acc + jnp.take(x, rows[step], axis=-1) * values[step]

        return jax.lax.fori_loop(0, len(ell_rows), add_step, y)

    def _apply_row_ell(self, param: jax.Array, x: jax.Array) -> jax.Array:
        ell_cols, entries = self._row_ell
        padded = jnp.concatenate([param, jnp.zeros((1,), param.dtype)])
        values = padded[jnp.asarray(entries)]  # [K, in]
        cols = jnp.asarray(ell_cols)
        y = jnp.zeros(x.shape[:-1] + (self.shape[1],), x.dtype)

        def add_step(step: int, acc: jax.Array) -> jax.Array:
            return acc.at[..., cols[step]].add(x * values[step])

        if len(ell_cols) <= UNROLL_STEPS:
            for step in range(len(ell_cols)):
                y = add_step(step, y)
            return y
        return jax.lax.fori_loop(0, len(ell_cols), add_step, y)


@dataclasses.dataclass(frozen=True)
class HeadSpec:
    """One attention head: query/key maps into a shared width, value/output maps."""

    w_q: SparseLinear
    w_k: SparseLinear
    w_v: SparseLinear
    w_o: SparseLinear


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

    @property
    def residual_width(self) -> int:
        return len(self.residual_labels)

    @property
    def num_layers(self) -> int:
        """Transformer layers (one attention and one MLP sub-layer each)."""
        return (len(self.layers) + 1) // 2


class ModelOutput(NamedTuple):
    """Result of a forward pass.

    `output`: `[batch, T, n_out]` logits, or `[batch, T]` values for a numerical output.
    `residuals`: the residual stream after the embedding and after every sub-layer.
    `attention`: per attention sub-layer, the `[batch, heads, T, T]` patterns.
    """

    output: jax.Array
    residuals: tuple[jax.Array, ...]
    attention: tuple[jax.Array, ...]


def _param(name: str, value: np.ndarray) -> jax.Array:
    return hk.get_parameter(name, value.shape, jnp.float32, init=hk.initializers.Constant(value))


class _ParamGroup(hk.Module):
    """The parameters of one part of the model (`embed`, `layer_3`, `unembed`)."""

    # Haiku would otherwise pretty-print the constructor arguments (every weight) on each trace.
    AUTO_REPR = False

    def __init__(self, values: dict[str, np.ndarray], name: str):
        super().__init__(name=name)
        self.values = values

    def __call__(self, key: str) -> jax.Array:
        return _param(key, self.values[key])


class CompiledTransformer(hk.Module):
    """The Haiku module; `weights` (numpy, keyed like the params) seed the parameters."""

    # Haiku's automatic repr pretty-prints the constructor arguments (the config with its
    # sparsity patterns, and every weight) whenever the module is built, i.e. on every trace:
    # at sort 50/50 that took 40 s and 2.3 GB before the first forward call.
    AUTO_REPR = False

    def __init__(self, config: ModelConfig, weights: dict[str, dict[str, np.ndarray]]):
        super().__init__(name=MODULE_NAME)
        self.config = config
        self.weights = weights

    def _get(self, module: str, name: str) -> jax.Array:
        return self._groups[module](name)

    def __call__(self, ids: jax.Array, projection: jax.Array | None = None) -> ModelOutput:
        config = self.config
        width = config.residual_width
        # Created here (not lazily inside a helper method) so Haiku names them plainly.
        self._groups = {module: _ParamGroup(values, name=module) for module, values in self.weights.items()}
        if projection is None:
            read: Callable[[jax.Array], jax.Array] = lambda r: r
            write: Callable[[jax.Array], jax.Array] = lambda y: y
        else:
            read = lambda r: jnp.einsum("...d,Dd->...D", r, projection, precision=PRECISION)
            write = lambda y: jnp.einsum("...D,Dd->...d", y, projection, precision=PRECISION)

        length = ids.shape[-1]
        token_onehot = jax.nn.one_hot(ids, config.vocab_size, dtype=jnp.float32)
        position_onehot = jax.nn.one_hot(jnp.arange(length), config.max_seq_len + 1)
        embedded = config.token_embed(self._get("embed", "token"), token_onehot, width)
        embedded = embedded + config.pos_embed(self._get("embed", "position"), position_onehot, width)
        stream = write(embedded)
        residuals = [read(stream)]
        attention = []

        key_ok = ids != config.pad_id  # [batch, T]
        mask = key_ok[..., None, :]
        if config.causal:
            mask = mask & jnp.tril(jnp.ones((length, length), dtype=bool))
        for index, layer in enumerate(config.layers):
            x = read(stream)
            module = f"layer_{index}"
            if isinstance(layer, AttentionSpec):
                delta, pattern = self._attention(module, layer, x, mask, width)
                attention.append(pattern)
            else:
                hidden = layer.w_in(self._get(module, "w_in"), x)
                delta = layer.w_out(self._get(module, "w_out"), activate(layer.activation, hidden), width)
            stream = stream + write(delta)
            residuals.append(read(stream))

        logits = config.unembed(self._get("unembed", "w_u"), read(stream))
        output = logits[..., 0] if config.numerical_output else logits
        return ModelOutput(output, tuple(residuals), tuple(attention))

    def _attention(
        self, module: str, layer: AttentionSpec, x: jax.Array, mask: jax.Array, width: int
    ) -> tuple[jax.Array, jax.Array]:
        delta = jnp.zeros_like(x)
        patterns = []
        for h, head in enumerate(layer.heads):
            q = head.w_q(self._get(module, f"head_{h}_q"), x)
            k = head.w_k(self._get(module, f"head_{h}_k"), x)
            v = head.w_v(self._get(module, f"head_{h}_v"), x)
            logits = jnp.einsum("...tr,...sr->...ts", q, k, precision=PRECISION)
            logits = jnp.where(mask, logits, MASKED_LOGIT)
            pattern = jax.nn.softmax(logits, axis=-1)
            mixed = jnp.einsum("...ts,...sr->...tr", pattern, v, precision=PRECISION)
            delta = delta + head.w_o(self._get(module, f"head_{h}_o"), mixed, width)
            patterns.append(pattern)
        if not patterns:
            batch_shape = x.shape[:-2]
            length = x.shape[-2]
            return delta, jnp.zeros(batch_shape + (0, length, length))
        return delta, jnp.stack(patterns, axis=-3)


MODULE_NAME = "compiled_transformer"


def build(config: ModelConfig, weights: dict[str, dict[str, np.ndarray]]):
    """Return `(params, forward)`: Haiku params and a jitted `forward(params, ids, projection)`.

    The params are laid out exactly as `hk.transform(...).init` would create them (module
    `compiled_transformer/<part>`, one entry per weight) but built directly from the compiled
    weights, which avoids tracing the model eagerly at compile time.
    """

    def run(ids: jax.Array, projection: jax.Array | None = None) -> ModelOutput:
        return CompiledTransformer(config, weights)(ids, projection)

    transformed = hk.without_apply_rng(hk.transform(run))
    params = {
        f"{MODULE_NAME}/{module}": {name: jnp.asarray(value, dtype=jnp.float32) for name, value in values.items()}
        for module, values in weights.items()
        if values
    }
    forward = jax.jit(transformed.apply)
    return params, forward, transformed
