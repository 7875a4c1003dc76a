"""Sites of a compiled model and the activations there, compressed or not.

A *site* is a place a dictionary-learning method reads activations from:

* ``Site("resid", k)``: the residual stream at snapshot ``k`` (0 = after the embedding, ``k`` =
  after sub-layer ``k - 1``), so sub-layer ``k``'s input is snapshot ``k`` and its output snapshot
  ``k + 1``. With a projection ``W`` (``[D, d]``) this is the model's own d-dimensional stream,
  not the decompressed ``r @ Wᵀ`` that ``ModelOutput.residuals`` holds.
* ``Site("mlp", i)``: MLP sub-layer ``i``, for transcoders: its hidden activations (the codes) and
  what it adds to the stream (``delta @ W``, the activations).

:class:`SiteRunner` runs the compiled weights with the forward pass of
:class:`compiler.model.transformer.CompiledTransformer` (the same sub-layer code), returning the
stream at any snapshot, and can *splice*: start the forward pass at a snapshot from a stream the
caller gives (e.g. an SAE's reconstruction) and return the output logits.

A compiled ``rasp.Loop`` stores its tied block once (``ModelConfig.tied``) and runs it several
times. Sites count the sub-layers the forward pass *runs*: sub-layer ``k`` is the ``k``-th one
executed (``config.layer_order[k]``), so every iteration of the loop has its own sites, named by
``CompiledModel.stage_names``. Internally every function here works on
:func:`compiler.model.tying.untied` of such a model (one copy of the block per iteration).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Literal

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from compiler import CompiledModel
from compiler.errors import LabError
from compiler.model.config import MODULE_NAME, AttentionSpec, LayerSpec, ModelConfig, SparseLinear
from compiler.model.transformer import PRECISION, CompiledTransformer, _ParamGroup, apply_linear, placed
from compiler.model.tying import untied
from craft.blocks import activate

SiteKind = Literal["resid", "mlp"]


@dataclasses.dataclass(frozen=True)
class Site:
    """A place in the forward pass: a residual snapshot or an MLP sub-layer (module docstring)."""

    kind: SiteKind
    index: int

    def name(self, compiled: CompiledModel) -> str:
        """Readable name: ``resid 3 (after layer 1 attn)`` or ``mlp 1 (layer 0 mlp)``."""
        stages = compiled.stage_names
        if self.kind == "resid":
            return f"resid {self.index} ({'embedding' if self.index == 0 else 'after ' + stages[self.index]})"
        return f"mlp {self.index} ({stages[self.index + 1]})"


def executed_layers(compiled: CompiledModel) -> tuple[LayerSpec, ...]:
    """The sub-layers in the order the forward pass runs them (a tied block once per iteration)."""
    config = compiled.config
    return tuple(config.layers[index] for index in config.layer_order)


def check_site(compiled: CompiledModel, site: Site) -> Site:
    """``site`` if the model has it, else a LabError naming the valid range."""
    layers = executed_layers(compiled)
    if site.kind == "resid":
        if not 0 <= site.index <= len(layers):
            raise LabError(f"{site}: residual snapshots of this model are 0..{len(layers)}")
    elif site.kind == "mlp":
        mlps = [i for i, layer in enumerate(layers) if not isinstance(layer, AttentionSpec)]
        if site.index not in mlps or layers[site.index].w_in.shape[1] == 0:
            nonempty = [i for i in mlps if layers[i].w_in.shape[1]]
            raise LabError(f"{site}: sub-layer {site.index} is not a non-empty MLP; MLP sub-layers: {nonempty}")
    else:
        raise LabError(f"unknown site kind {site.kind!r}; use 'resid' or 'mlp'")
    return site


def residual_sites(compiled: CompiledModel) -> tuple[Site, ...]:
    """Every residual snapshot of the model.

    Args:
        compiled: the compiled model; a compiled loop counts each iteration's sub-layers.

    Returns:
        ``Site("resid", k)`` for ``k`` from 0 (after the embedding) to the number of executed
        sub-layers (after the last), in order.
    """
    return tuple(Site("resid", k) for k in range(len(executed_layers(compiled)) + 1))


def _rows(specs: list[SparseLinear], side: str, width: int) -> tuple[int, ...]:
    """The residual coordinates some of ``specs`` read (``side="in"``) or write (``"out"``)."""
    found: set[int] = set()
    for spec in specs:
        idx = spec.in_idx if side == "in" else spec.out_idx
        if idx is None:
            return tuple(range(width))
        found |= set(idx)
    return tuple(sorted(found))


def _remap(spec: SparseLinear, rows: tuple[int, ...], side: str) -> SparseLinear:
    """``spec`` reading (writing) positions within ``rows`` instead of residual coordinates."""
    idx = spec.in_idx if side == "in" else spec.out_idx
    if idx is None:
        return spec
    at = {r: j for j, r in enumerate(rows)}
    new: tuple[int, ...] | None = tuple(at[i] for i in idx)
    if new == tuple(range(len(rows))):
        new = None  # every row in order: no gather (in) or scatter (out) at all
    return dataclasses.replace(spec, in_idx=new) if side == "in" else dataclasses.replace(spec, out_idx=new)


# A column set in at most this many contiguous runs is read by slicing and written by slice
# updates; XLA's CPU scatter was most of the exact model's time (an MLP writing 3,968 columns).
MAX_RUNS = 16


def _runs(rows: tuple[int, ...]) -> list[tuple[int, int, int]]:
    """``rows`` (sorted) as contiguous runs ``(start, stop, offset within rows)``."""
    runs: list[tuple[int, int, int]] = []
    for offset, row in enumerate(rows):
        if runs and runs[-1][1] == row:
            runs[-1] = (runs[-1][0], row + 1, runs[-1][2])
        else:
            runs.append((row, row + 1, offset))
    return runs


def _columns(r: jax.Array, rows: tuple[int, ...]) -> jax.Array:
    """``r[..., rows]``, by slices when the rows form few runs."""
    runs = _runs(rows)
    if len(runs) == 1 and runs[0][:2] == (0, r.shape[-1]):
        return r
    if len(runs) > MAX_RUNS:
        return jnp.take(r, np.asarray(rows, np.int32), axis=-1)
    return jnp.concatenate([r[..., a:b] for a, b, _ in runs] or [r[..., :0]], axis=-1)


def _add_columns(r: jax.Array, y: jax.Array, rows: tuple[int, ...]) -> jax.Array:
    """``r`` with ``y`` added at columns ``rows``, by slice updates when the rows form few runs."""
    runs = _runs(rows)
    if len(runs) > MAX_RUNS:
        return r.at[..., np.asarray(rows, np.int32)].add(y)
    for a, b, offset in runs:
        r = r.at[..., a:b].add(y[..., offset:offset + b - a])
    return r


def sparse_matrix(spec: SparseLinear, param: np.ndarray, in_width: int, out_width: int) -> sparse.csr_array:
    """``spec`` with parameter ``param`` as a scipy sparse ``[in_width, out_width]`` matrix."""
    rows = np.arange(spec.shape[0]) if spec.in_idx is None else spec.in_array
    cols = np.arange(spec.shape[1]) if spec.out_idx is None else spec.out_array
    if spec.is_sparse:
        (r, c), data = spec.pattern, np.asarray(param)
    else:
        param = np.asarray(param)
        r, c = np.nonzero(param)
        data = param[r, c]
    return sparse.csr_array((data, (rows[r], cols[c])), shape=(in_width, out_width))


def embedding_tables(compiled: CompiledModel, projection: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """``(tokens [vocab, width], positions [max_seq_len + 1, width])``: what the embedding writes
    into the stream for each token and position, through ``projection`` when given.

    The embedding of a one-hot input is a row lookup, so the forward pass gathers these rows
    instead of multiplying one-hots by ``[vocab, D]`` and then by ``W`` (``B T D d`` work, half of
    a compressed pass at the 4k stage).
    """
    config = compiled.config
    embed = compiled.params[f"{MODULE_NAME}/embed"]
    width = config.residual_width
    tables = [sparse_matrix(config.token_embed, embed["token"], config.vocab_size, width)]
    positions = config.max_seq_len + 1
    tables.append(sparse_matrix(config.pos_embed, embed["position"], positions, width) if "position" in embed
                  else sparse.csr_array((positions, width), dtype=np.float32))
    if projection is None:
        return tuple(np.asarray(t.toarray(), np.float32) for t in tables)  # type: ignore[return-value]
    w = np.asarray(projection, np.float64)
    return tuple(np.asarray(t.astype(np.float64) @ w, np.float32) for t in tables)  # type: ignore[return-value]


# A row set of W whose non-zero entries fall into blocks (under the packed projection, each s-op's
# code block) is read and written block by block when that costs at most this share of the dense
# product; blocks of at most SMALL_BLOCK rows (a protected axis is one row and one column) are
# merged into one, and more than MAX_BLOCKS blocks stay dense.
BLOCK_SHARE = 0.5
SMALL_BLOCK = 4
MAX_BLOCKS = 128


@dataclasses.dataclass(frozen=True)
class _Block:
    """Rows of W (positions within a step's row set) whose non-zeros lie in ``columns`` only."""

    positions: tuple[int, ...]
    columns: tuple[int, ...]


def projection_blocks(projection: np.ndarray, rows: tuple[int, ...]) -> tuple[_Block, ...] | None:
    """``W[rows]`` as blocks of rows and the columns they use (connected components of its
    non-zeros), or None when the blocks would cost more than ``BLOCK_SHARE`` of the dense product.

    A 64-head copy layer of the 16k-copy stage writes 16,384 rows of a 768-wide W, each through a
    code block of about 7 columns: 115,000 products per position instead of 12.6 million.
    Rows that are zero in W are in no block (they read 0 and write nothing).
    """
    nonzero = sparse.coo_array(np.asarray(projection)[list(rows)] != 0)
    count, width = nonzero.shape
    graph = sparse.coo_array((np.ones(nonzero.nnz), (nonzero.row, count + nonzero.col)),
                             shape=(count + width, count + width))
    _, labels = connected_components(graph, directed=False)
    row_label, col_label = labels[:count], labels[count:]
    used_rows, used_cols = np.unique(nonzero.row), np.unique(nonzero.col)
    groups, small_rows, small_cols = [], [], []
    for label in np.unique(row_label[used_rows]):
        positions = used_rows[row_label[used_rows] == label]
        columns = used_cols[col_label[used_cols] == label]
        if len(positions) <= SMALL_BLOCK:
            small_rows.append(positions)
            small_cols.append(columns)
        else:
            groups.append((positions, columns))
    if small_rows:
        groups.append((np.concatenate(small_rows), np.unique(np.concatenate(small_cols))))
    cost = sum(len(p) * len(c) for p, c in groups)
    if len(groups) > MAX_BLOCKS or cost > BLOCK_SHARE * count * width:
        return None
    return tuple(_Block(tuple(int(i) for i in np.sort(p)), tuple(int(j) for j in c)) for p, c in groups)


@dataclasses.dataclass(frozen=True)
class _Step:
    """One sub-layer as the compressed forward pass runs it: it reads ``W[reads]`` only and
    writes through ``W[writes]``, with its weights re-indexed into those rows."""

    layer: LayerSpec
    reads: tuple[int, ...]
    writes: tuple[int, ...]


def _plan(config: ModelConfig) -> tuple[tuple[_Step, ...], _Step]:
    width = config.residual_width
    steps = []
    for layer in config.layers:
        if isinstance(layer, AttentionSpec):
            # The heads read the rows their queries, keys and values read, and their sum is
            # formed in the rows their outputs write (CompiledTransformer._attention's width):
            # a layer of 64 copy heads reads 321 rows and writes 16,384 at the 16k-copy stage.
            reads = _rows([s for h in layer.heads for s in (h.w_q, h.w_k, h.w_v)], "in", width)
            writes = _rows([h.w_o for h in layer.heads], "out", width)
            heads = tuple(dataclasses.replace(h, w_q=_remap(h.w_q, reads, "in"), w_k=_remap(h.w_k, reads, "in"),
                                              w_v=_remap(h.w_v, reads, "in"), w_o=_remap(h.w_o, writes, "out"))
                          for h in layer.heads)
            steps.append(_Step(dataclasses.replace(layer, heads=heads), reads, writes))
        else:
            reads, writes = _rows([layer.w_in], "in", width), _rows([layer.w_out], "out", width)
            steps.append(_Step(dataclasses.replace(layer, w_in=_remap(layer.w_in, reads, "in"),
                                                   w_out=_remap(layer.w_out, writes, "out")), reads, writes))
    reads = _rows([config.unembed], "in", width)
    return tuple(steps), _Step(_remap(config.unembed, reads, "in"), reads, ())


class _Runner(CompiledTransformer):
    """The compiled transformer, entered at any snapshot, stopped at any snapshot.

    Compressed (``projection`` given), each sub-layer reads only the rows of ``W`` its weights
    read (``x[:, reads] = r @ W[reads]ᵀ``) and writes through the rows it writes: the same
    numbers as reading the whole ``r @ Wᵀ``, at a cost set by the sub-layer, not by D. The exact
    model reads and writes those residual columns by slices (:data:`MAX_RUNS`).
    """

    def __init__(self, config: ModelConfig, weights: dict[str, dict[str, np.ndarray]],
                 blocks: dict[tuple[int, ...], tuple[_Block, ...] | None] | None = None):
        super().__init__(config, weights)
        self.steps, self.unembed_step = _plan(config)
        self.blocks = blocks or {}

    def __call__(self, ids: jax.Array, projection: jax.Array | None,  # type: ignore[override]
                 tables: tuple[jax.Array, jax.Array] | None,
                 start: int = 0, stream: jax.Array | None = None, stop: int | None = None, logits: bool = True):
        """Streams of snapshots ``start..stop`` (the given ``stream`` at ``start``, or the embedding
        from ``tables`` (:func:`embedding_tables`) when ``start`` is 0 and none is given), MLP
        hidden activations and deltas, and the output (None unless ``logits`` and ``stop`` is the
        last snapshot)."""
        config = self.config
        stop = len(config.layers) if stop is None else stop
        # The parameter groups of CompiledTransformer, so Haiku names (and so params) match.
        self._groups = {module: _ParamGroup(values, name=module) for module, values in self.weights.items()}

        def part(rows: tuple[int, ...], block: _Block) -> jax.Array:
            return projection[np.ix_(np.asarray(rows)[list(block.positions)], block.columns)]

        def read(r: jax.Array, rows: tuple[int, ...]) -> jax.Array:
            if projection is None:
                return _columns(r, rows)
            blocks = self.blocks.get(rows)
            if blocks is None:
                return jnp.einsum("...d,Dd->...D", r, projection[np.asarray(rows)], precision=PRECISION)
            y = jnp.concatenate([jnp.einsum("...c,pc->...p", _columns(r, b.columns), part(rows, b), precision=PRECISION)
                                 for b in blocks], axis=-1)
            return placed(y, np.concatenate([b.positions for b in blocks]), len(rows))

        def add(r: jax.Array, y: jax.Array, rows: tuple[int, ...]) -> jax.Array:
            if projection is None:
                return _add_columns(r, y, rows)
            blocks = self.blocks.get(rows)
            if blocks is None:
                return r + jnp.einsum("...D,Dd->...d", y, projection[np.asarray(rows)], precision=PRECISION)
            out = jnp.concatenate([jnp.einsum("...p,pc->...c", _columns(y, b.positions), part(rows, b),
                                              precision=PRECISION) for b in blocks], axis=-1)
            return r + placed(out, np.concatenate([b.columns for b in blocks]), r.shape[-1])

        length = ids.shape[-1]
        if stream is None:
            stream = jnp.take(tables[0], ids, axis=0) + tables[1][:length]
        mask = (ids != config.pad_id)[..., None, :]
        if config.causal:
            mask = mask & jnp.tril(jnp.ones((length, length), dtype=bool))
        streams, hidden, deltas = {start: stream}, {}, {}
        for index in range(start, stop):
            step = self.steps[index]
            layer, module = step.layer, f"layer_{index}"
            if isinstance(layer, AttentionSpec):
                if layer.heads:
                    delta, _ = self._attention(module, layer, read(stream, step.reads), mask, len(step.writes),
                                               self._get)
                    stream = add(stream, delta, step.writes)
            elif layer.w_in.shape[1]:
                pre = apply_linear(layer.w_in, self._get(module, "w_in"), read(stream, step.reads))
                hidden[index] = activate(layer.activation, pre)
                delta = apply_linear(layer.w_out, self._get(module, "w_out"), hidden[index], len(step.writes))
                deltas[index] = add(jnp.zeros_like(stream), delta, step.writes)  # dropped by jit unless asked for
                stream = add(stream, delta, step.writes)
            streams[index + 1] = stream
        output = None
        if logits and stop == len(config.layers):
            out = apply_linear(self.unembed_step.layer, self._get("unembed", "w_u"),
                               read(stream, self.unembed_step.reads))
            output = out[..., 0] if config.numerical_output else out
        return streams, hidden, deltas, output


@dataclasses.dataclass(frozen=True, eq=False)
class Capture:
    """One forward pass recorded at every site (numpy arrays)."""

    streams: tuple[np.ndarray, ...]  # per residual snapshot, [batch, T, width]
    hidden: dict[int, np.ndarray]  # per MLP sub-layer, [batch, T, hidden]
    deltas: dict[int, np.ndarray]  # per MLP sub-layer, what it adds to the stream, [batch, T, width]
    output: np.ndarray

    def activations(self, site: Site) -> np.ndarray:
        """The activations at ``site`` (see :meth:`SiteRunner.activations`)."""
        return self.streams[site.index] if site.kind == "resid" else self.deltas[site.index]

    def values(self, site: Site) -> np.ndarray:
        """What the true codes are read from: the stream (resid) or the hidden activations (mlp)."""
        return self.streams[site.index] if site.kind == "resid" else self.hidden[site.index]


@dataclasses.dataclass(frozen=True, eq=False)
class SiteRunner:
    """Activations at sites and spliced forward passes of one compiled model (optionally
    compressed by ``projection``); every call is jitted once per site and input shape. A model with a
    tied block (a compiled loop) is run untied (module docstring)."""

    compiled: CompiledModel
    projection: np.ndarray | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "compiled", untied(self.compiled))

    @functools.cached_property
    def _apply(self):
        config = self.compiled.config
        weights = {key.split("/", 1)[1]: {n: np.asarray(v) for n, v in value.items()}
                   for key, value in self.compiled.params.items()}
        blocks = {}
        if self.projection is not None:  # which rows of W each step reads and writes, by block
            steps, unembed = _plan(config)
            for rows in {rows for step in steps for rows in (step.reads, step.writes)} | {unembed.reads}:
                blocks[rows] = projection_blocks(self.projection, rows) if rows else None
        transformed = hk.without_apply_rng(hk.transform(
            lambda ids, projection, tables, start, stream, stop=None, logits=True:
            _Runner(config, weights, blocks)(ids, projection, tables, start, stream, stop, logits)))
        return transformed.apply

    @functools.cached_property
    def _tables(self) -> tuple[jax.Array, jax.Array]:
        return tuple(jnp.asarray(t) for t in embedding_tables(self.compiled, self.projection))  # type: ignore[return-value]

    @functools.cached_property
    def _w(self) -> jax.Array | None:
        return None if self.projection is None else jnp.asarray(self.projection, jnp.float32)

    @property
    def width(self) -> int:
        """Width of the stream the model keeps: d when compressed, else D."""
        return self.compiled.config.residual_width if self.projection is None else int(np.shape(self.projection)[1])

    @functools.cached_property
    def _at(self):
        apply = self._apply

        def at(params, ids, w, tables, kind: str, index: int):
            stop = index if kind == "resid" else index + 1
            streams, hidden, deltas, _ = apply(params, ids, w, tables, 0, None, stop, False)
            if kind == "resid":
                return streams[index], None
            return deltas[index], hidden[index]

        return jax.jit(at, static_argnames=("kind", "index"))

    @functools.cached_property
    def _all(self):
        apply = self._apply
        return jax.jit(lambda params, ids, w, tables: apply(params, ids, w, tables, 0, None))

    def capture(self, ids: np.ndarray | jax.Array) -> Capture:
        """Every site at once (one jitted pass): streams, MLP hidden activations and deltas, output."""
        streams, hidden, deltas, output = self._all(self.compiled.params, jnp.asarray(ids, jnp.int32), self._w,
                                                    self._tables)
        return Capture(tuple(np.asarray(streams[k]) for k in sorted(streams)),
                       {i: np.asarray(h) for i, h in hidden.items()},
                       {i: np.asarray(h) for i, h in deltas.items()}, np.asarray(output))

    @functools.cached_property
    def _from(self):
        apply = self._apply

        def from_(params, ids, w, stream, start: int):
            return apply(params, ids, w, None, start, stream)[3]

        return jax.jit(from_, static_argnames=("start",))

    def activations(self, ids: np.ndarray | jax.Array, site: Site) -> jax.Array:
        """``[batch, T, width]``: the stream at a residual site, or what an MLP site adds to it."""
        check_site(self.compiled, site)
        return self._at(self.compiled.params, jnp.asarray(ids, jnp.int32), self._w, self._tables, site.kind,
                        site.index)[0]

    def hidden(self, ids: np.ndarray | jax.Array, site: Site) -> jax.Array:
        """``[batch, T, hidden]``: the hidden activations of an MLP site."""
        if site.kind != "mlp":
            raise LabError(f"{site}: hidden activations exist at MLP sites only")
        check_site(self.compiled, site)
        return self._at(self.compiled.params, jnp.asarray(ids, jnp.int32), self._w, self._tables, site.kind,
                        site.index)[1]

    @functools.cached_property
    def _output(self):
        apply = self._apply
        return jax.jit(lambda params, ids, w, tables: apply(params, ids, w, tables, 0, None)[3])

    def output(self, ids: np.ndarray | jax.Array) -> jax.Array:
        """The model's output (logits, or values for a numerical output) on ``ids``."""
        return self._output(self.compiled.params, jnp.asarray(ids, jnp.int32), self._w, self._tables)

    def spliced_output(self, ids: np.ndarray | jax.Array, site: Site, stream: np.ndarray | jax.Array) -> jax.Array:
        """The output when the stream at residual ``site`` is replaced by ``stream``
        (``[batch, T, width]``, e.g. an SAE's reconstruction) and the forward pass goes on."""
        if site.kind != "resid":
            raise LabError(f"{site}: splicing replaces a residual snapshot; use Site('resid', k)")
        check_site(self.compiled, site)
        stream = jnp.asarray(stream, jnp.float32)
        if stream.shape[-1] != self.width:
            raise LabError(f"spliced stream has width {stream.shape[-1]}; the model's stream has {self.width}")
        return self._from(self.compiled.params, jnp.asarray(ids, jnp.int32), self._w, stream, site.index)
