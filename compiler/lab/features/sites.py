"""Sites of a compiled model and the activations there, compressed or not.

A *site* is a place a dictionary-learning method reads activations from:

* ``Site("resid", k)``: the residual stream at snapshot ``k`` (0 = after the embedding, ``k`` =
  after sub-layer ``k - 1``), so sub-layer ``k``'s input is snapshot ``k`` and its output snapshot
  ``k + 1``. With a projection ``W`` (``[D, d]``) this is the model's own d-dimensional stream,
  not the decompressed ``r @ Wᵀ`` that ``ModelOutput.residuals`` holds.
* ``Site("mlp", i)``: MLP sub-layer ``i``, for transcoders: its hidden activations (the codes) and
  what it adds to the stream (``delta @ W``, the activations).

:class:`SiteRunner` runs the model's own forward pass
(:class:`compiler.model.transformer.CompiledTransformer`: its ``capture`` of sites and its
``start``/``stream`` to enter at a snapshot), returning the stream at any snapshot, and can
*splice*: start the forward pass at a snapshot from a stream the caller gives (e.g. an SAE's
reconstruction) and return the output logits. Compressed, it gives the pass the row blocks of its
fixed ``W`` (:func:`compiler.model.projected.blocks_of`), so wide feature stages read and write
the stream block by block.

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

from compiler import CompiledModel
from compiler.errors import LabError
from compiler.model.config import MODULE_NAME, AttentionSpec, LayerSpec, MLPSpec, SparseLinear, layer_module
from compiler.model.projected import blocks_of
from compiler.model.transformer import CompiledTransformer
from compiler.model.tying import untied

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
        mlps = {i: layer for i, layer in enumerate(layers) if isinstance(layer, MLPSpec)}
        if site.index not in mlps or mlps[site.index].w_in.shape[1] == 0:
            nonempty = [i for i, layer in mlps.items() if layer.w_in.shape[1]]
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
    assert rows is not None and cols is not None  # in_array / out_array where the indices are set
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
    tokens = sparse_matrix(config.token_embed, embed["token"], config.vocab_size, width)
    count = config.max_seq_len + 1
    positions = (sparse_matrix(config.pos_embed, embed["position"], count, width) if "position" in embed
                 else sparse.csr_array((count, width), dtype=np.float32))
    if projection is None:
        return np.asarray(tokens.toarray(), np.float32), np.asarray(positions.toarray(), np.float32)
    w = np.asarray(projection, np.float64)
    return np.asarray(tokens.astype(np.float64) @ w, np.float32), np.asarray(positions.astype(np.float64) @ w, np.float32)


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
        """The model's forward pass (`CompiledTransformer`), with a fixed projection's row blocks."""
        config = self.compiled.config
        weights = {key.split("/", 1)[1]: {n: np.asarray(v) for n, v in value.items()}
                   for key, value in self.compiled.params.items()}
        blocks = blocks_of(config, self.projection) if self.projection is not None else None
        transformed = hk.without_apply_rng(hk.transform(
            lambda ids, projection, stream, start=0, stop=None, capture=():
            CompiledTransformer(config, weights, blocks)(ids, projection, True, start=start, stop=stop, stream=stream,
                                                         capture=capture)))
        return transformed.apply

    def _embedded(self, ids: jax.Array, tables: tuple[jax.Array, jax.Array]) -> jax.Array:
        """The stream at snapshot 0, gathered from the embedding tables (`embedding_tables`)."""
        return jnp.take(tables[0], ids, axis=0) + tables[1][: ids.shape[-1]]

    @functools.cached_property
    def _mlps(self) -> tuple[int, ...]:
        """The non-empty MLP sub-layers (the MLP sites)."""
        return tuple(i for i, layer in enumerate(self.compiled.config.layers)
                     if not isinstance(layer, AttentionSpec) and layer.w_in.shape[1])

    @functools.cached_property
    def _tables(self) -> tuple[jax.Array, jax.Array]:
        tokens, positions = embedding_tables(self.compiled, self.projection)
        return jnp.asarray(tokens), jnp.asarray(positions)

    @functools.cached_property
    def _w(self) -> jax.Array | None:
        return None if self.projection is None else jnp.asarray(self.projection, jnp.float32)

    @property
    def width(self) -> int:
        """Width of the stream the model keeps: d when compressed, else D."""
        return self.compiled.config.residual_width if self.projection is None else int(np.shape(self.projection)[1])

    @functools.cached_property
    def _at(self):
        apply, embedded = self._apply, self._embedded

        def at(params, ids, w, tables, kind: str, index: int):
            names: tuple[str, ...] = (f"resid.{index}",)
            if kind != "resid":
                names = (f"{layer_module(index)}.delta", f"{layer_module(index)}.hidden")
            stop = index if kind == "resid" else index + 1
            cache = apply(params, ids, w, embedded(ids, tables), 0, stop, names).cache
            return tuple(cache[name] for name in names) + (None,) * (2 - len(names))

        return jax.jit(at, static_argnames=("kind", "index"))

    @functools.cached_property
    def _all(self):
        apply, embedded, count, mlps = self._apply, self._embedded, len(self.compiled.config.layers), self._mlps
        names = tuple(f"resid.{k}" for k in range(count + 1)) + tuple(
            f"{layer_module(i)}.{part}" for i in mlps for part in ("hidden", "delta"))
        return jax.jit(lambda params, ids, w, tables: apply(params, ids, w, embedded(ids, tables), 0, None, names))

    def capture(self, ids: np.ndarray | jax.Array) -> Capture:
        """Every site at once (one jitted pass): streams, MLP hidden activations and deltas, output."""
        out = self._all(self.compiled.params, jnp.asarray(ids, jnp.int32), self._w, self._tables)
        count = len(self.compiled.config.layers)
        return Capture(tuple(np.asarray(out.cache[f"resid.{k}"]) for k in range(count + 1)),
                       {i: np.asarray(out.cache[f"{layer_module(i)}.hidden"]) for i in self._mlps},
                       {i: np.asarray(out.cache[f"{layer_module(i)}.delta"]) for i in self._mlps}, np.asarray(out.output))

    @functools.cached_property
    def _from(self):
        apply = self._apply

        def from_(params, ids, w, stream, start: int):
            return apply(params, ids, w, stream, start).output

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
        apply, embedded = self._apply, self._embedded
        return jax.jit(lambda params, ids, w, tables: apply(params, ids, w, embedded(ids, tables)).output)

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
