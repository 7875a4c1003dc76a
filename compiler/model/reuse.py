"""Residual reuse: give the directions of a value that is dead to a value written later.

After assembly every residual coordinate has a life: the sub-layers that write it (the embedding
counts as sub-layer -1) and the sub-layers that read it (the unembedding counts as reading after
the last one). Once its last reader has run, a coordinate only takes up width. This pass lets a
coordinate written later share the same slot of the residual stream, which is exact because the
old value is first *cleared*: an MLP sub-layer `m`, at or after the old value's last read and
after its last write, gets two more ReLU units that add `-relu(x) + relu(-x) = -x` to the slot
(`x` is the value there, exactly, so the slot becomes exactly zero at every position). The new
value is first written at `m` or later, so every reader sees what it saw before.

Coordinates that nothing writes are always zero and are dropped with the rows that read them.

The pass is opt-in (`compile_rasp(..., reuse_residual=True)`): a slot then has several owners,
so tools that map one residual coordinate to one s-op direction (circuit and feature ground
truth, compression structure) see only the first owner (`CompiledModel.residual_space`) and the
labels join all of them (`"keys:3 | target_pos:1"`). `ResidualReuse.owners` says which direction
owns a slot at which sub-layer; model files store it (`compiler.io.files`, format version 3).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from scipy import sparse

from compiler.model.config import MLP_IN, MLP_OUT, MLPSpec, ModelConfig, SparseLinear, layer_module
from craft.bases import VectorSpaceWithBasis

Weights = dict[str, dict[str, np.ndarray]]

# Label separator of a slot shared by several directions.
SEPARATOR = " | "


@dataclasses.dataclass(frozen=True)
class Owner:
    """One direction's tenure of a slot: written from sub-layer `start` (-1: the embedding) and
    cleared by the MLP sub-layer `cleared` (`None`: kept to the end)."""

    label: str
    old_index: int
    start: int
    cleared: int | None


@dataclasses.dataclass(frozen=True)
class ResidualReuse:
    """What the pass did: per new slot its owners in order, and the widths before and after."""

    owners: tuple[tuple[Owner, ...], ...]
    width_before: int
    width_after: int
    # The most coordinates holding a value that is still to be read, after any one sub-layer (or
    # the embedding): no reuse of whole coordinates can go below it.
    peak_alive: int = 0

    def owner_at(self, slot: int, sublayer: int) -> str | None:
        """The label of the direction held by `slot` in the stream after `sublayer` (-1: after
        the embedding), or `None` when the slot is cleared or not yet written there."""
        for owner in self.owners[slot]:
            if owner.start <= sublayer and (owner.cleared is None or sublayer < owner.cleared):
                return owner.label
        return None


@dataclasses.dataclass
class _Life:
    writes: list[int] = dataclasses.field(default_factory=list)
    reads: list[int] = dataclasses.field(default_factory=list)


def _residual_side(spec: SparseLinear, param: np.ndarray, axis: int, width: int) -> tuple[np.ndarray, sparse.coo_array]:
    """The residual coordinates of `spec`'s residual axis (0: it reads, 1: it writes) and its
    matrix as COO over its own coordinates."""
    idx = spec.in_idx if axis == 0 else spec.out_idx
    coords = np.arange(width) if idx is None else np.asarray(idx, dtype=np.int64)
    return coords, _coo(spec, param)


def _coo(spec: SparseLinear, param: np.ndarray) -> sparse.coo_array:
    """The weight's matrix over its own coordinates, never dense when stored sparse."""
    param = np.asarray(param, dtype=np.float32)
    if spec.is_sparse:
        rows, cols = spec.pattern
        return sparse.coo_array((param, (rows, cols)), shape=spec.shape)
    return sparse.coo_array(param)


def _touched(spec: SparseLinear, param: np.ndarray, axis: int, width: int) -> np.ndarray:
    coords, matrix = _residual_side(spec, param, axis, width)
    keep = matrix.data != 0
    return np.unique(coords[(matrix.row, matrix.col)[axis][keep]])


def _lives(config: ModelConfig, weights: Weights) -> list[_Life]:
    width = config.residual_width
    lives = [_Life() for _ in range(width)]
    end = len(config.layers)
    for key, spec in config.linears().items():
        param = weights[key.module][key.name]
        writes = key.writes_residual
        # the embedding writes before sub-layer 0; the unembedding reads after the last one
        when = key.sublayer if key.sublayer is not None else (-1 if writes else end)
        for c in _touched(spec, param, 1 if writes else 0, width):
            (lives[c].writes if writes else lives[c].reads).append(when)
    return lives


def _clearing_layer(life: _Life, mlps: Sequence[int]) -> int | None:
    """The first ReLU MLP sub-layer at or after the last read and after the last write."""
    after_read = max(life.reads, default=-1)
    after_write = max(life.writes) + 1
    return next((m for m in mlps if m >= after_read and m >= after_write), None)


def plan(config: ModelConfig, lives: Sequence[_Life]) -> tuple[np.ndarray, list[list[int]], dict[int, list[int]]]:
    """`(slot of each coordinate or -1 when dropped, coordinates per slot, coordinates cleared
    per MLP sub-layer)`: the coordinates in order of their first write, each into the slot freed
    latest before it (best fit), or a new slot."""
    mlps = [
        i
        for i, layer in enumerate(config.layers)
        if isinstance(layer, MLPSpec) and (layer.activation == "relu" or layer.w_in.shape[1] == 0)
    ]
    slot_of = np.full(len(lives), -1, dtype=np.int64)
    slots: list[list[int]] = []
    free: list[tuple[int, int]] = []  # (sub-layer from which the slot is free, slot)
    clears: dict[int, list[int]] = {}
    order = sorted((c for c, life in enumerate(lives) if life.writes), key=lambda c: (min(lives[c].writes), c))
    for c in order:
        life = lives[c]
        start = min(life.writes)
        reusable = start >= 0 and all(read > start for read in life.reads)
        fits = [entry for entry in free if entry[0] <= start] if reusable else []
        if fits:
            entry = max(fits)
            free.remove(entry)
            slot = entry[1]
            clears.setdefault(entry[0], []).append(slots[slot][-1])
            slots[slot].append(c)
        else:
            slot = len(slots)
            slots.append([c])
        slot_of[c] = slot
        cleared = _clearing_layer(life, mlps)
        if cleared is not None:
            free.append((cleared, slot))
    return slot_of, slots, clears


def _remap(spec: SparseLinear, param: np.ndarray, axis: int, width: int, slot_of: np.ndarray) -> tuple[SparseLinear, np.ndarray]:
    """`spec` with its residual axis moved to slots (entries of one slot summed, dropped
    coordinates' entries removed)."""
    coords, matrix = _residual_side(spec, param, axis, width)
    residual = (matrix.row, matrix.col)[axis]
    slots = slot_of[coords[residual]]
    keep = (slots >= 0) & (matrix.data != 0)
    used = np.unique(slot_of[coords][slot_of[coords] >= 0])
    local = np.searchsorted(used, slots[keep])
    other = (matrix.col, matrix.row)[axis][keep]
    rows, cols = (local, other) if axis == 0 else (other, local)
    shape = (len(used), spec.shape[1]) if axis == 0 else (spec.shape[0], len(used))
    moved = sparse.coo_array((matrix.data[keep], (rows, cols)), shape=shape)
    moved.sum_duplicates()
    idx = tuple(int(s) for s in used)
    if axis == 0:
        return SparseLinear.from_matrix(moved, in_idx=idx, out_idx=spec.out_idx)
    return SparseLinear.from_matrix(moved, in_idx=spec.in_idx, out_idx=idx)


def _with_clearing(
    layer: MLPSpec, params: dict[str, np.ndarray], coords: list[int], width: int
) -> tuple[SparseLinear, np.ndarray, SparseLinear, np.ndarray]:
    """The MLP's `w_in` / `w_out` over all residual coordinates, with two units per cleared
    coordinate appended: `relu(x)` written back with weight -1, `relu(-x)` with +1."""
    hidden = layer.w_in.shape[1]
    in_coords, w_in = _residual_side(layer.w_in, params[MLP_IN], 0, width)
    out_coords, w_out = _residual_side(layer.w_out, params[MLP_OUT], 1, width)
    cleared = np.repeat(np.asarray(coords, dtype=np.int64), 2)
    units = hidden + np.arange(len(cleared))
    signs = np.tile(np.asarray([1.0, -1.0], dtype=np.float32), len(coords))
    shape_in, shape_out = (width, hidden + len(units)), (hidden + len(units), width)
    full_in = sparse.coo_array(
        (np.concatenate([w_in.data, signs]), (np.concatenate([in_coords[w_in.row], cleared]), np.concatenate([w_in.col, units]))),
        shape=shape_in,
    )
    full_out = sparse.coo_array(
        (np.concatenate([w_out.data, -signs]), (np.concatenate([w_out.row, units]), np.concatenate([out_coords[w_out.col], cleared]))),
        shape=shape_out,
    )
    spec_in, param_in = SparseLinear.from_matrix(full_in)
    spec_out, param_out = SparseLinear.from_matrix(full_out)
    return spec_in, param_in, spec_out, param_out


def reuse_residual(config: ModelConfig, weights: Weights) -> tuple[ModelConfig, Weights, ResidualReuse]:
    """`config` and `weights` over the reused residual slots, and the record of the owners.

    The model computes the same outputs (exactly: clearing subtracts the value itself); its
    residual snapshots hold each slot's current owner.
    """
    width = config.residual_width
    lives = _lives(config, weights)
    slot_of, slots, clears = plan(config, lives)
    weights = {module: dict(values) for module, values in weights.items()}
    layers = list(config.layers)
    for m, coords in clears.items():
        module = layer_module(m)
        layer = layers[m]
        assert isinstance(layer, MLPSpec), "clearing units are added to MLP sub-layers"
        spec_in, w_in, spec_out, w_out = _with_clearing(layer, weights[module], coords, width)
        layers[m] = dataclasses.replace(layer, w_in=spec_in, w_out=spec_out, activation="relu")
        weights[module][MLP_IN], weights[module][MLP_OUT] = w_in, w_out
    config = dataclasses.replace(config, layers=tuple(layers))
    specs = {}
    for key, spec in config.linears().items():
        new_spec, new_param = _remap(spec, weights[key.module][key.name], 1 if key.writes_residual else 0, width, slot_of)
        specs[key] = new_spec
        weights[key.module][key.name] = new_param
    clearing_layer = {c: m for m, coords in clears.items() for c in coords}
    owners = tuple(
        tuple(
            Owner(config.residual_labels[c], c, min(lives[c].writes), clearing_layer.get(c))
            for c in coords
        )
        for coords in slots
    )
    labels = tuple(SEPARATOR.join(config.residual_labels[c] for c in coords) for coords in slots)
    config = dataclasses.replace(config.with_linears(specs, config.backend), residual_labels=labels)
    record = ResidualReuse(owners=owners, width_before=width, width_after=len(slots), peak_alive=peak_alive(lives, len(config.layers)))
    return config, weights, record


def peak_alive(lives: Sequence[_Life], sublayers: int) -> int:
    """The largest number of coordinates written at or before sub-layer `s` and read after it,
    over every `s` from the embedding (-1) to the last sub-layer."""
    alive = np.zeros(sublayers + 1, dtype=np.int64)  # index s + 1
    for life in lives:
        if life.writes and life.reads:
            first, last = min(life.writes), max(life.reads)
            if last > first:
                alive[first + 1 : last + 1] += 1
    return int(alive.max(initial=0))


def first_owners(residual: VectorSpaceWithBasis, reuse: ResidualReuse) -> VectorSpaceWithBasis:
    """The residual basis after reuse, one direction per slot: its first owner's."""
    return VectorSpaceWithBasis(tuple(residual.basis[owners[0].old_index] for owners in reuse.owners))


__all__ = ["SEPARATOR", "Owner", "ResidualReuse", "first_owners", "plan", "reuse_residual"]
