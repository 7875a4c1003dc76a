"""The compiled transformer as a Haiku model.

A decoder-only transformer: token and position embeddings, alternating attention and MLP
sub-layers that add into the residual stream, and an unembedding of the output s-op; with
`ModelConfig.norm`, a LayerNorm or RMSNorm before every sub-layer and before the unembedding
(`compiler.model.norm`). Sizes are per layer (each attention layer has its own heads, each MLP its own width and
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

from collections.abc import Callable, Collection
from typing import Any, NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from compiler.errors import CompilerError
from compiler.model.config import (
    MASKED_LOGIT,
    MODULE_NAME,
    AttentionSpec,
    ModelConfig,
    NormSpec,
    ParamKey,
    SparseLinear,
    layer_module,
)
from compiler.model.projected import PRECISION, Blocks, add_rows, placed, plan, read_rows
from craft.blocks import activate

# Up to this many ELL steps are unrolled; more run in a `lax.fori_loop`.
UNROLL_STEPS = 8


def apply_linear(spec: SparseLinear, param: jax.Array, x: jax.Array, out_width: int | None = None) -> jax.Array:
    """`spec` with parameter `param` applied to `x[..., in]`, never forming `[..., non-zeros]`.

    By `spec.applied_form` (`compiler.model.config.FORMS`): dense, one matmul; columns (ELL),
    for each step `t < K` gather one input per output column and multiply-add (work `K * out`
    per token, memory one output-sized array); rows, scatter-add one scaled input row per step;
    interval, one prefix sum over the permuted inputs and two gathers per output column;
    rebuild, the matrix made dense once per call (its own size, independent of batch and
    length) for one matmul. With `out_idx`, the result is placed into `out_width` coordinates
    (`add_linear` adds it into an existing stream instead, without the zero array).
    """
    y = _product(spec, param, _inputs(spec, x))
    if spec.out_idx is None:
        return y
    assert out_width is not None, "a scattered output needs its width"
    return _add_outputs(spec, jnp.zeros(y.shape[:-1] + (out_width,), y.dtype), y)


def add_linear(stream: jax.Array, spec: SparseLinear, param: jax.Array, x: jax.Array) -> jax.Array:
    """`stream + apply_linear(spec, param, x, width)` without a `[..., width]` array of zeros:
    the product is added into the coordinates it writes (slices where they are a few runs)."""
    y = _product(spec, param, _inputs(spec, x))
    if spec.out_idx is None:
        return stream + y
    return _add_outputs(spec, stream, y)


def add_products(stream: jax.Array, parts: list[tuple[SparseLinear, jax.Array, jax.Array]]) -> jax.Array:
    """`stream` plus `apply_linear(spec, param, x)` of every `(spec, param, x)` in `parts`.

    When the parts write disjoint coordinates (an attention layer whose heads each write their
    own s-op), their products are laid side by side in coordinate order, with zeros between, and
    added in one pass. XLA's CPU backend copies the whole `[batch, T, width]` array for each slice
    update into it: 64 updates of 256 columns of a `[64, 65, 16384]` float32 array took 1.76 s,
    one concatenation of the same columns 0.12 s. Every coordinate gets the same single addition
    either way, so the result is the same. Parts that overlap, or write every coordinate, are
    added one by one (`add_linear`).
    """
    targets = [spec.out_idx for spec, _, _ in parts]
    coords = np.concatenate([np.asarray(t, np.int64) for t in targets]) if parts and None not in targets else None
    if coords is None or len(parts) < 2 or len(np.unique(coords)) < len(coords):
        for spec, param, x in parts:
            stream = add_linear(stream, spec, param, x)
        return stream
    y = jnp.concatenate([_product(spec, param, _inputs(spec, x)) for spec, param, x in parts], axis=-1)
    return stream + placed(y, coords, stream.shape[-1])


def _inputs(spec: SparseLinear, x: jax.Array) -> jax.Array:
    """`x[..., in_idx]`: slices when `in_idx` is a few runs (`SparseLinear.in_runs`), else a gather."""
    if spec.in_idx is None:
        return x
    runs = spec.in_runs
    if runs is None:
        index = spec.in_array
        assert index is not None  # in_idx is set
        return jnp.take(x, index, axis=-1)
    parts = [x[..., first : first + size] for _, first, size in runs]
    return parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=-1)


def _add_outputs(spec: SparseLinear, stream: jax.Array, y: jax.Array) -> jax.Array:
    """`stream[..., out_idx] += y`: slice updates when `out_idx` is a few runs, else a scatter-add."""
    runs = spec.out_runs
    if runs is None:
        return stream.at[..., spec.out_array].add(y)
    for start, first, size in runs:
        stream = stream.at[..., first : first + size].add(y[..., start : start + size])
    return stream


def _product(spec: SparseLinear, param: jax.Array, x: jax.Array) -> jax.Array:
    """`x @ M` over the weight's own coordinates, computed in `spec.applied_form`."""
    form = spec.applied_form
    if form == "dense":
        return jnp.einsum("...i,io->...o", x, param, precision=PRECISION)
    if form == "columns":
        return _apply_ell(spec, param, x)
    if form == "rows":
        return _apply_row_ell(spec, param, x)
    if form == "interval":
        return _apply_interval(spec, param, x)
    rows, cols = spec.pattern
    matrix = jnp.zeros(spec.shape, param.dtype).at[rows, cols].set(param)
    return jnp.einsum("...i,io->...o", x, matrix, precision=PRECISION)


# Block size of `_prefix_sums`: the within-block sums are one matmul with a 0/1 triangle.
SCAN_BLOCK = 32


def _prefix_sums(x: jax.Array) -> jax.Array:
    """`[0, x0, x0 + x1, ...]` along the last axis (one longer than `x`).

    Blocked: sums within blocks of `SCAN_BLOCK` by a matmul with an upper-triangular 0/1 matrix,
    plus each block's offset (a matmul of the block totals with a strict triangle). On XLA's CPU
    backend this is about three times faster than `jnp.cumsum` (an associative scan); both add
    the same terms, exactly for 0/1 inputs.
    """
    n = x.shape[-1]
    block = min(SCAN_BLOCK, n + 1)
    count = -(-(n + 1) // block)
    padded = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(1, count * block - n - 1)])  # a leading 0
    padded = padded.reshape(x.shape[:-1] + (count, block))
    within = jnp.einsum("...kb,bc->...kc", padded, jnp.triu(jnp.ones((block, block), x.dtype)), precision=PRECISION)
    offsets = jnp.einsum(
        "...k,kl->...l", within[..., -1], jnp.triu(jnp.ones((count, count), x.dtype), 1), precision=PRECISION
    )
    return (within + offsets[..., None]).reshape(x.shape[:-1] + (count * block,))[..., : n + 1]


def _interval_columns(sums: jax.Array, lo: np.ndarray, hi: np.ndarray, entry: np.ndarray, param: jax.Array) -> jax.Array:
    """Column `j` is `value_j * (S[hi_j] - S[lo_j])` from the prefix sums `S` of the permuted
    input; `entry` indexes each column's weight in `param` (its length: an appended zero)."""
    values = jnp.concatenate([param, jnp.zeros((1,), param.dtype)])[jnp.asarray(entry)]
    return (jnp.take(sums, jnp.asarray(hi), axis=-1) - jnp.take(sums, jnp.asarray(lo), axis=-1)) * values


def _apply_interval(spec: SparseLinear, param: jax.Array, x: jax.Array) -> jax.Array:
    """`x @ W` in the interval form (`SparseLinear.interval`)."""
    found = spec.interval
    assert found is not None, "the interval form is chosen only where the pattern has one"
    perm, lo, hi, entry = found
    return _interval_columns(_prefix_sums(jnp.take(x, jnp.asarray(perm), axis=-1)), lo, hi, entry, param)


def _shared_interval(shared: tuple, param_q: jax.Array, param_k: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """`(x @ W_Q, x @ W_K)` from one prefix sum (`HeadSpec.shared_interval`)."""
    coords, (lo_q, hi_q, entry_q), (lo_k, hi_k, entry_k) = shared
    sums = _prefix_sums(jnp.take(x, jnp.asarray(coords), axis=-1))
    return _interval_columns(sums, lo_q, hi_q, entry_q, param_q), _interval_columns(sums, lo_k, hi_k, entry_k, param_k)


def _apply_ell(spec: SparseLinear, param: jax.Array, x: jax.Array) -> jax.Array:
    ell_rows, entries = spec.ell
    padded = jnp.concatenate([param, jnp.zeros((1,), param.dtype)])
    values = padded[jnp.asarray(entries)]  # [K, out]
    y = jnp.zeros(x.shape[:-1] + (spec.shape[1],), x.dtype)
    if len(ell_rows) <= UNROLL_STEPS:
        for step in range(len(ell_rows)):
            y = y + jnp.take(x, jnp.asarray(ell_rows[step]), axis=-1) * values[step]
        return y
    rows = jnp.asarray(ell_rows)

    def add_step(step: int, acc: jax.Array) -> jax.Array:
        return acc + jnp.take(x, rows[step], axis=-1) * values[step]

    return jax.lax.fori_loop(0, len(ell_rows), add_step, y)

def _apply_row_ell(spec: SparseLinear, param: jax.Array, x: jax.Array) -> jax.Array:
    ell_cols, entries = spec.row_ell
    padded = jnp.concatenate([param, jnp.zeros((1,), param.dtype)])
    values = padded[jnp.asarray(entries)]  # [K, in]
    cols = jnp.asarray(ell_cols)
    y = jnp.zeros(x.shape[:-1] + (spec.shape[1],), x.dtype)

    def add_step(step: int, acc: jax.Array) -> jax.Array:
        return acc.at[..., cols[step]].add(x * values[step])

    if len(ell_cols) <= UNROLL_STEPS:
        for step in range(len(ell_cols)):
            y = add_step(step, y)
        return y
    return jax.lax.fori_loop(0, len(ell_cols), add_step, y)


def normalise(stream: jax.Array, norm: NormSpec) -> jax.Array:
    """One norm site (`compiler.model.config.NormSpec`): the stream's LayerNorm or RMSNorm over
    its last axis, times the norm's gain."""
    if norm.kind == "layernorm":
        stream = stream - jnp.mean(stream, axis=-1, keepdims=True)
    return stream * (norm.scale * jax.lax.rsqrt(jnp.mean(jnp.square(stream), axis=-1, keepdims=True) + norm.eps))


def embedding_table(spec: SparseLinear, param: jax.Array, rows: int, width: int) -> jax.Array:
    """`[rows, width]`: the weight as a dense matrix over all its input and output coordinates
    (for an embedding, row `i` is what one-hot input `i` writes)."""
    if spec.is_sparse:
        matrix = jnp.zeros(spec.shape, param.dtype).at[spec.pattern].set(param)
    else:
        matrix = param
    if spec.in_idx is not None:
        matrix = jnp.zeros((rows, spec.shape[1]), matrix.dtype).at[spec.in_array].add(matrix)
    if spec.out_idx is not None:
        matrix = _add_outputs(spec, jnp.zeros((matrix.shape[0], width), matrix.dtype), matrix)
    return matrix


class ModelOutput(NamedTuple):
    """Result of a forward pass.

    `output`: `[batch, T, n_out]` logits, or `[batch, T]` values for a numerical output.
    `residuals`: the residual stream after the embedding and after every sub-layer.
    `attention`: per attention sub-layer, the `[batch, heads, T, T]` patterns.
    `written`: per sub-layer, what it adds to the stream in residual coordinates `[batch, T, D]`,
    before the projection writes it into the compressed stream; empty when `projection=None`
    (the differences of consecutive `residuals` are then the same arrays). Compression compares
    these with the compiled model's: they equal them whenever every read of the compressed model
    is right, whatever `W Wᵀ` is.
    `hidden`: per ReLU MLP sub-layer, the pre-activations of the hidden units its output reads
    (`[batch, T, units]`; units whose output row is zero are left out), also only when a
    projection is given: a thresholded lookup reads right when each of them keeps its compiled
    sign, which compression's exactness objective asks for with a margin.

    `cache`: the values of the sites named in the call's `capture` (`CompiledTransformer`).

    A forward pass called with `outputs_only=True` returns `output` alone (the four tuples
    empty): XLA then never keeps a `[batch, T, D]` snapshot per sub-layer, only the stream it is
    updating, which is what lets wide models (sort at 200/200: 2.1 GB per snapshot at batch 64)
    run at all. A pass stopped before the last snapshot has no `output` (None).
    """

    output: jax.Array | None
    residuals: tuple[jax.Array, ...]
    attention: tuple[jax.Array, ...]
    written: tuple[jax.Array, ...] = ()
    hidden: tuple[jax.Array, ...] = ()
    cache: dict[str, jax.Array] = {}


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


# `(site, function)` pairs of a forward pass's hooks (a tuple, so a jitted pass can take it as static).
Hooks = tuple[tuple[str, Callable[[jax.Array], jax.Array]], ...]


class CompiledTransformer(hk.Module):
    """The Haiku module; `weights` (numpy, keyed like the params) seed the parameters, `blocks`
    (optional) say how a fixed projection's rows are read block by block."""

    # Haiku's automatic repr pretty-prints the constructor arguments (the config with its
    # sparsity patterns, and every weight) whenever the module is built, i.e. on every trace:
    # at sort 50/50 that took 40 s and 2.3 GB before the first forward call.
    AUTO_REPR = False

    def __init__(self, config: ModelConfig, weights: dict[str, dict[str, np.ndarray]], blocks: Blocks | None = None):
        super().__init__(name=MODULE_NAME)
        self.config = config
        self.weights = weights
        self.blocks: Blocks = blocks or {}  # a fixed projection's row blocks (`compiler.model.projected`)

    def _get(self, module: str, name: str) -> jax.Array:
        return self._groups[module](name)

    def __call__(
        self, ids: jax.Array, projection: jax.Array | None = None, outputs_only: bool = False, *,
        start: int = 0, stop: int | None = None, stream: jax.Array | None = None,
        hooks: Hooks = (), capture: Collection[str] = (),
    ) -> ModelOutput:
        """The forward pass from residual snapshot `start` to snapshot `stop`.

        Args:
          ids: `[batch, T]` token ids.
          projection: None, or `W` (`[D, d]`): the stream has width d, every sub-layer reads
            the rows of `W` its weights read and writes through the rows they write
            (`compiler.model.projected`).
          outputs_only: keep no residual snapshots, patterns or written deltas.
          start: the snapshot the pass starts at (0: after the embedding; `k`: after sub-layer
            `k - 1`); past 0 it needs `stream`.
          stop: the snapshot it stops at (default: the last, followed by the unembedding).
          stream: the stream at `start` (`[batch, T, width]`, width d with a projection), instead
            of the embedding at 0 or a required input past 0.
          hooks: `(site, function)` pairs: the value at `site` is replaced by `function(value)`.
            Sites: `resid.<k>` (the stream at snapshot k, as the model keeps it),
            `layer_<i>.head_<h>.z` (head h's mixed values, before `W_O`), `layer_<i>.hidden`
            (an MLP's activations) and `layer_<i>.delta` (what sub-layer i adds to the stream).
          capture: sites whose values (after their hooks) are returned in `ModelOutput.cache`.
        Returns:
          The `ModelOutput`.
        Raises:
          CompilerError: `start`/`stop` out of range, a start past 0 without `stream`, or
            `start`, `stop`, hooks or captures on a model with a tied block (untie it first).
        """
        config = self.config
        width, count, tied = config.residual_width, len(config.layers), config.tied
        stop = count if stop is None else stop
        if not 0 <= start <= stop <= count:
            raise CompilerError(f"start {start} and stop {stop} must satisfy 0 <= start <= stop <= {count}")
        if start and stream is None:
            raise CompilerError(f"a pass starting at snapshot {start} needs the stream there (stream=...)")
        if tied is not None and (start or stop != count or hooks or capture):
            raise CompilerError("this model runs a tied block (a compiled loop) in one scan: untie it first "
                                "(compiler.model.tying.untied) to start, stop, hook or capture inside it")
        norm = config.norm
        if norm is not None and projection is not None:
            raise CompilerError(f"this model has a {norm.kind} before every sub-layer, which a residual projection "
                                "would change (it normalises the compressed stream); make a projection of its "
                                "compiled coordinates (compression.analytic.residual_structure(model) reads them) "
                                "and fold it into this model (compiler.model.folding.folded_model)")
        # Created here (not lazily inside a helper method) so Haiku names them plainly.
        self._groups = {module: _ParamGroup(values, name=module) for module, values in self.weights.items()}
        hooked, cache = dict(hooks), {}
        wanted = set(capture) | set(hooked)

        def site(name: str, value: jax.Array) -> jax.Array:
            if name in hooked:
                value = hooked[name](value)
            if name in capture:
                cache[name] = value
            return value

        steps, readout = plan(config) if projection is not None else ((), None)
        decompress: Callable[[jax.Array], jax.Array] = (
            (lambda r: r) if projection is None
            else (lambda r: jnp.einsum("...d,Dd->...D", r, projection, precision=PRECISION)))

        length = ids.shape[-1]
        if stream is None:
            # A one-hot input times a matrix is a row of it: look the rows up in the embedding tables.
            tokens = embedding_table(config.token_embed, self._get("embed", "token"), config.vocab_size, width)
            positions = embedding_table(config.pos_embed, self._get("embed", "position"), config.max_seq_len + 1, width)
            stream = jnp.take(tokens, ids, axis=0) + positions[:length]
            if projection is not None:
                stream = jnp.einsum("...D,Dd->...d", stream, projection, precision=PRECISION)
        current: jax.Array = site(f"resid.{start}", stream)
        keep = not outputs_only
        residuals = [decompress(current)] if keep else []

        key_ok = ids != config.pad_id  # [batch, T]
        mask = key_ok[..., None, :]
        if config.causal:
            mask = mask & jnp.tril(jnp.ones((length, length), dtype=bool))

        def run(indices: range, stream: jax.Array, get: Callable[[str, str], jax.Array]) -> tuple:
            """Sub-layers `indices` in order: the stream after them, and per sub-layer the
            residual, the attention pattern (attention only), the written delta and the ReLU
            pre-activations read by the output (MLP only; both last only with a projection)."""
            residuals, attention, written, hidden_pre = [], [], [], []
            for index in indices:
                module = layer_module(index)
                layer = config.layers[index] if projection is None else steps[index].layer
                if projection is not None:
                    x = read_rows(stream, projection, steps[index].reads, self.blocks)
                else:
                    x = stream if norm is None else normalise(stream, norm)
                out_width = width if projection is None else len(steps[index].writes)
                # Without a projection (or a hook on the delta) each sub-layer adds straight into
                # (a copy of) the stream: no `[batch, T, D]` delta of zeros per sub-layer, which
                # dominated wide models.
                separate = projection is not None or f"{module}.delta" in wanted
                base = jnp.zeros(x.shape[:-1] + (out_width,), x.dtype) if separate else stream
                if isinstance(layer, AttentionSpec):
                    delta, pattern = self._attention(module, layer, x, mask, get, base, keep, site)
                    if keep:
                        attention.append(pattern)
                else:
                    hidden = apply_linear(layer.w_in, get(module, "w_in"), x)
                    if keep and projection is not None and layer.activation == "relu":
                        hidden_pre.append(jnp.take(hidden, self._output_rows(module, layer.w_out), axis=-1))
                    activations = site(f"{module}.hidden", activate(layer.activation, hidden))
                    delta = add_linear(base, layer.w_out, get(module, "w_out"), activations)
                if projection is not None:
                    writes = steps[index].writes
                    if keep:
                        written.append(placed(delta, np.asarray(writes), width))
                    if f"{module}.delta" in wanted:
                        delta = site(f"{module}.delta", add_rows(jnp.zeros_like(stream), delta, projection, writes,
                                                                 self.blocks))
                        stream = stream + delta
                    else:
                        stream = add_rows(stream, delta, projection, writes, self.blocks)
                elif separate:
                    stream = stream + site(f"{module}.delta", delta)
                else:
                    stream = delta
                stream = site(f"resid.{index + 1}", stream)
                if keep:
                    residuals.append(decompress(stream))
            return stream, residuals, attention, written, hidden_pre

        segments = [range(start, stop)] if tied is None else [range(tied.start), range(tied.stop, count)]
        current, *records = run(segments[0], current, self._get)
        if tied is not None:
            # The tied block runs `repeats` times in one `lax.scan` (traced and compiled once);
            # its parameters are fetched before, since Haiku parameters cannot be read inside.
            block = range(tied.start, tied.stop)
            modules = {layer_module(index) for index in block}
            fetched = {key: self._get(*key) for key in config.linears() if key.module in modules}

            def iteration(carry: jax.Array, _: None) -> tuple[jax.Array, tuple]:
                carry, *per_layer = run(block, carry, lambda module, name: fetched[ParamKey(module, name)])
                return carry, tuple(tuple(items) for items in per_layer)

            current, stacked = jax.lax.scan(iteration, current, None, length=tied.repeats)
            for record, items in zip(records, stacked):
                record.extend(item[repeat] for repeat in range(tied.repeats) for item in items)
            current, *after = run(segments[1], current, self._get)
            for record, items in zip(records, after):
                record.extend(items)
        residuals += records[0]
        output = None
        if stop == count:
            if projection is None or readout is None:
                final = current if norm is None else normalise(current, norm)
                logits = apply_linear(config.unembed, self._get("unembed", "w_u"), final)
            else:
                read = read_rows(current, projection, readout.reads, self.blocks)
                logits = apply_linear(readout.spec, self._get("unembed", "w_u"), read)
            output = logits[..., 0] if config.numerical_output else logits
        return ModelOutput(output, tuple(residuals), tuple(records[1]), tuple(records[2]), tuple(records[3]), cache)

    def _output_rows(self, module: str, w_out: SparseLinear) -> np.ndarray:
        """The hidden units with a non-zero row in `w_out` (from its sparsity pattern, or from the
        dense weight's values, which are known when the model is traced)."""
        if w_out.is_sparse:
            rows = w_out.pattern[0]
        else:
            rows = np.nonzero(np.any(np.asarray(self.weights[module]["w_out"]) != 0, axis=1))[0]
        return np.unique(rows).astype(np.int32)

    def _attention(
        self,
        module: str,
        layer: AttentionSpec,
        x: jax.Array,
        mask: jax.Array,
        get: Callable[[str, str], jax.Array],
        base: jax.Array,
        keep: bool,
        site: Callable[[str, jax.Array], jax.Array],
    ) -> tuple[jax.Array, jax.Array | None]:
        """`(base + what the heads write, the patterns)`; the patterns are None when not `keep`.
        Each head's mixed values pass the hook site `<module>.head_<h>.z`."""
        patterns, outputs = [], []
        for h, head in enumerate(layer.heads):
            shared = head.shared_interval
            if shared is not None:  # one permutation and one prefix sum for both
                q, k = _shared_interval(shared, get(module, f"head_{h}_q"), get(module, f"head_{h}_k"), x)
            else:
                q = apply_linear(head.w_q, get(module, f"head_{h}_q"), x)
                k = apply_linear(head.w_k, get(module, f"head_{h}_k"), x)
            v = apply_linear(head.w_v, get(module, f"head_{h}_v"), x)
            logits = jnp.einsum("...tr,...sr->...ts", q, k, precision=PRECISION)
            logits = jnp.where(mask, logits, MASKED_LOGIT)
            pattern = jax.nn.softmax(logits, axis=-1)
            mixed = site(f"{module}.head_{h}.z", jnp.einsum("...ts,...sr->...tr", pattern, v, precision=PRECISION))
            outputs.append((head.w_o, get(module, f"head_{h}_o"), mixed))
            patterns.append(pattern)
        delta = add_products(base, outputs)
        if not keep:
            return delta, None
        if not patterns:
            batch_shape = x.shape[:-2]
            length = x.shape[-2]
            return delta, jnp.zeros(batch_shape + (0, length, length))
        return delta, jnp.stack(patterns, axis=-3)


def build(
    config: ModelConfig, weights: dict[str, dict[str, np.ndarray]]
) -> tuple[dict[str, dict[str, jax.Array]], jax.stages.Wrapped, hk.Transformed]:
    """Return `(params, forward, transformed)`.

    `params` are the Haiku params, `forward(params, ids, projection=None, outputs_only=False,
    **options)` the jitted forward pass (`CompiledTransformer.__call__`'s options; all but
    `stream` static, so `capture` is a tuple): `ModelOutput`, and `transformed` the `hk.Transformed` pair behind it (for callers that re-trace the
    model, e.g. with other params). The params are laid out exactly as `hk.transform(...).init` would create them (module
    `compiled_transformer/<part>`, one entry per weight) but built directly from the compiled
    weights, which avoids tracing the model eagerly at compile time.
    """

    def run(ids: jax.Array, projection: jax.Array | None = None, outputs_only: bool = False, **options: Any
            ) -> ModelOutput:
        return CompiledTransformer(config, weights)(ids, projection, outputs_only, **options)

    transformed: hk.Transformed = hk.without_apply_rng(hk.transform(run))
    params = {
        f"{MODULE_NAME}/{module}": {name: jnp.asarray(value, dtype=jnp.float32) for name, value in values.items()}
        for module, values in weights.items()
        if values
    }
    forward = jax.jit(transformed.apply, static_argnames=("outputs_only", "start", "stop", "hooks", "capture"))
    return params, forward, transformed


__all__ = [
    "PRECISION",
    "CompiledTransformer",
    "ModelOutput",
    "add_linear",
    "apply_linear",
    "embedding_table",
    "build",
    "normalise",
]
