"""How the forward pass reads and writes a compressed residual stream.

With a projection `W` (`[D, d]`) the stream has width d; a sub-layer reads `r @ Wᵀ` and adds
`y @ W`. It needs only the residual coordinates its weights touch, so each sub-layer reads the
rows `W[reads]` (`x = r @ W[reads]ᵀ`, its weights re-indexed into those rows) and writes through
`W[writes]`: the numbers of reading the whole `r @ Wᵀ` and writing a `D`-wide delta, at a cost
set by the sub-layer, not by D (a layer of 64 copy heads of the 16k-copy feature stage reads 321
rows and writes 16,384).

When `W` is known when the pass is traced (a fixed projection, not one being trained), its rows
can also be read block by block: `projection_blocks` splits a row set into blocks of rows and the
columns they use (the connected components of its non-zeros; under the packed projection each
s-op's code block), so a product costs the blocks' sizes instead of `rows x d`.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from compiler.model.config import AttentionSpec, LayerSpec, ModelConfig, SparseLinear

# Matrix products run at float32 precision: reduced-precision defaults on accelerators (TF32,
# bf16 passes) would break the exactness of compiled programs.
PRECISION = jax.lax.Precision.HIGHEST

# A row set of W whose non-zero entries fall into blocks is read and written block by block when
# that costs at most this share of the dense product; blocks of at most SMALL_BLOCK rows (a
# protected axis is one row and one column) are merged into one, and more than MAX_BLOCKS blocks
# stay dense.
BLOCK_SHARE = 0.5
SMALL_BLOCK = 4
MAX_BLOCKS = 128


@dataclasses.dataclass(frozen=True)
class Step:
    """One sub-layer as a compressed pass runs it: it reads `W[reads]` and writes through
    `W[writes]`, its weights re-indexed into those rows."""

    layer: LayerSpec
    reads: tuple[int, ...]
    writes: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Readout:
    """The unembedding as a compressed pass runs it: it reads `W[reads]`, re-indexed into them."""

    spec: SparseLinear
    reads: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Block:
    """Rows of W (positions within a step's row set) whose non-zeros lie in `columns` only."""

    positions: tuple[int, ...]
    columns: tuple[int, ...]


Blocks = dict[tuple[int, ...], tuple[Block, ...] | None]


def _rows(specs: list[SparseLinear], side: str, width: int) -> tuple[int, ...]:
    """The residual coordinates some of `specs` read (`side="in"`) or write (`"out"`)."""
    found: set[int] = set()
    for spec in specs:
        idx = spec.in_idx if side == "in" else spec.out_idx
        if idx is None:
            return tuple(range(width))
        found |= set(idx)
    return tuple(sorted(found))


def _remap(spec: SparseLinear, rows: tuple[int, ...], side: str) -> SparseLinear:
    """`spec` reading (writing) positions within `rows` instead of residual coordinates."""
    idx = spec.in_idx if side == "in" else spec.out_idx
    if idx is None:
        return spec
    at = {r: j for j, r in enumerate(rows)}
    new: tuple[int, ...] | None = tuple(at[i] for i in idx)
    if new == tuple(range(len(rows))):
        new = None  # every row in order: no gather (in) or scatter (out) at all
    return dataclasses.replace(spec, in_idx=new) if side == "in" else dataclasses.replace(spec, out_idx=new)


def plan(config: ModelConfig) -> tuple[tuple[Step, ...], Readout]:
    """Per sub-layer of `config.layers`, the rows it reads and writes with its re-indexed weights,
    and the unembedding's step."""
    width = config.residual_width
    steps = []
    for layer in config.layers:
        if isinstance(layer, AttentionSpec):
            # The heads read the rows their queries, keys and values read; their sum is formed
            # in the rows their outputs write.
            reads = _rows([s for h in layer.heads for s in (h.w_q, h.w_k, h.w_v)], "in", width)
            writes = _rows([h.w_o for h in layer.heads], "out", width)
            heads = tuple(dataclasses.replace(h, w_q=_remap(h.w_q, reads, "in"), w_k=_remap(h.w_k, reads, "in"),
                                              w_v=_remap(h.w_v, reads, "in"), w_o=_remap(h.w_o, writes, "out"))
                          for h in layer.heads)
            steps.append(Step(dataclasses.replace(layer, heads=heads), reads, writes))
        else:
            reads, writes = _rows([layer.w_in], "in", width), _rows([layer.w_out], "out", width)
            steps.append(Step(dataclasses.replace(layer, w_in=_remap(layer.w_in, reads, "in"),
                                                  w_out=_remap(layer.w_out, writes, "out")), reads, writes))
    reads = _rows([config.unembed], "in", width)
    return tuple(steps), Readout(_remap(config.unembed, reads, "in"), reads)


def projection_blocks(projection: np.ndarray, rows: tuple[int, ...]) -> tuple[Block, ...] | None:
    """`W[rows]` as blocks of rows and the columns they use (connected components of its
    non-zeros), or None when the blocks would cost more than `BLOCK_SHARE` of the dense product.

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
    return tuple(Block(tuple(int(i) for i in np.sort(p)), tuple(int(j) for j in c)) for p, c in groups)


def blocks_of(config: ModelConfig, projection: np.ndarray) -> Blocks:
    """For every row set a pass over `config` reads or writes, its blocks under a fixed
    `projection` (None where the rows are read densely)."""
    steps, unembed = plan(config)
    row_sets = {rows for step in steps for rows in (step.reads, step.writes)} | {unembed.reads}
    return {rows: projection_blocks(projection, rows) if rows else None for rows in row_sets}


# A column set in at most this many contiguous runs is read by slicing, else by one gather.
MAX_RUNS = 16


def _columns(r: jax.Array, columns: tuple[int, ...]) -> jax.Array:
    """`r[..., columns]` (sorted columns), by slices when they form few contiguous runs."""
    starts = [i for i, c in enumerate(columns) if i == 0 or columns[i - 1] != c - 1]
    if not starts:
        return r[..., :0]
    if len(starts) > MAX_RUNS:
        return jnp.take(r, np.asarray(columns, np.int32), axis=-1)
    stops = starts[1:] + [len(columns)]
    parts = [r[..., columns[a]:columns[a] + b - a] for a, b in zip(starts, stops)]
    return parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=-1)


def read_rows(stream: jax.Array, projection: jax.Array, rows: tuple[int, ...], blocks: Blocks) -> jax.Array:
    """`stream @ W[rows]ᵀ`: the residual coordinates `rows` as the compressed stream holds them."""
    found = blocks.get(rows)
    if found is None:
        return jnp.einsum("...d,Dd->...D", stream, _rows_of(projection, rows), precision=PRECISION)
    if not found:  # every one of these rows of W is zero: they read 0
        return jnp.zeros(stream.shape[:-1] + (len(rows),), stream.dtype)
    parts = [jnp.einsum("...c,pc->...p", _columns(stream, b.columns), _part(projection, rows, b), precision=PRECISION)
             for b in found]
    return placed(jnp.concatenate(parts, axis=-1), np.concatenate([b.positions for b in found]), len(rows))


def add_rows(stream: jax.Array, y: jax.Array, projection: jax.Array, rows: tuple[int, ...], blocks: Blocks) -> jax.Array:
    """`stream + y @ W[rows]`: a delta over the residual coordinates `rows` written into the stream."""
    found = blocks.get(rows)
    if found is None:
        return stream + jnp.einsum("...D,Dd->...d", y, _rows_of(projection, rows), precision=PRECISION)
    if not found:  # every one of these rows of W is zero: they write nothing
        return stream
    parts = [jnp.einsum("...p,pc->...c", _columns(y, b.positions), _part(projection, rows, b), precision=PRECISION)
             for b in found]
    return stream + placed(jnp.concatenate(parts, axis=-1), np.concatenate([b.columns for b in found]),
                            stream.shape[-1])


def _rows_of(projection: jax.Array, rows: tuple[int, ...]) -> jax.Array:
    """`projection[rows]` (sorted rows): the whole matrix, slices of few runs, else a gather (slices
    compile faster, which is most of a small model's first call)."""
    if rows == tuple(range(projection.shape[0])):
        return projection
    return _columns(projection.T, rows).T


def _part(projection: jax.Array, rows: tuple[int, ...], block: Block) -> jax.Array:
    return projection[np.ix_(np.asarray(rows)[list(block.positions)], np.asarray(block.columns))]


def placed(y: jax.Array, coords: np.ndarray, width: int) -> jax.Array:
    """`[..., width]` zeros with column `j` of `y` at coordinate `coords[j]` (distinct), built by one
    concatenation of slices of `y` and zero gaps (a column gather first if `coords` is unsorted)."""
    coords = np.asarray(coords, np.int64)
    if np.any(np.diff(coords) < 0):
        order = np.argsort(coords, kind="stable")
        y, coords = jnp.take(y, order, axis=-1), coords[order]
    breaks = np.flatnonzero(np.diff(coords) != 1) + 1
    starts, stops = np.concatenate(([0], breaks)), np.concatenate((breaks, [len(coords)]))
    pieces, at = [], 0
    for a, b in zip(starts, stops):
        if a == b:
            continue
        first = int(coords[a])
        if first > at:
            pieces.append(jnp.zeros(y.shape[:-1] + (first - at,), y.dtype))
        pieces.append(y[..., a:b])
        at = first + int(b - a)
    if at < width:
        pieces.append(jnp.zeros(y.shape[:-1] + (width - at,), y.dtype))
    if not pieces:
        return jnp.zeros(y.shape[:-1] + (0,), y.dtype)
    return pieces[0] if len(pieces) == 1 else jnp.concatenate(pieces, axis=-1)
