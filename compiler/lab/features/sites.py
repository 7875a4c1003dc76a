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
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Literal

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from compiler import CompiledModel
from compiler.model.config import AttentionSpec
from compiler.model.transformer import PRECISION, CompiledTransformer, _ParamGroup, apply_linear
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


def check_site(compiled: CompiledModel, site: Site) -> Site:
    """``site`` if the model has it, else a ValueError naming the valid range."""
    layers = compiled.config.layers
    if site.kind == "resid":
        if not 0 <= site.index <= len(layers):
            raise ValueError(f"{site}: residual snapshots of this model are 0..{len(layers)}")
    elif site.kind == "mlp":
        mlps = [i for i, layer in enumerate(layers) if not isinstance(layer, AttentionSpec)]
        if site.index not in mlps or layers[site.index].w_in.shape[1] == 0:
            nonempty = [i for i in mlps if layers[i].w_in.shape[1]]
            raise ValueError(f"{site}: sub-layer {site.index} is not a non-empty MLP; MLP sub-layers: {nonempty}")
    else:
        raise ValueError(f"unknown site kind {site.kind!r}; use 'resid' or 'mlp'")
    return site


def residual_sites(compiled: CompiledModel) -> tuple[Site, ...]:
    """Every residual snapshot of the model."""
    return tuple(Site("resid", k) for k in range(len(compiled.config.layers) + 1))


class _Runner(CompiledTransformer):
    """The compiled transformer, entered at any snapshot and read at any sub-layer."""

    def __call__(self, ids: jax.Array, projection: jax.Array | None = None, start: int = 0,  # type: ignore[override]
                 stream: jax.Array | None = None):
        """Streams from snapshot ``start`` on (the given ``stream`` there, or the embedding when
        ``start`` is 0 and no stream is given), the MLP hidden activations and deltas, the output."""
        config = self.config
        width = config.residual_width
        # The parameter groups of CompiledTransformer, so Haiku names (and so params) match.
        self._groups = {module: _ParamGroup(values, name=module) for module, values in self.weights.items()}
        if projection is None:
            read, write = (lambda r: r), (lambda y: y)
        else:
            read = lambda r: jnp.einsum("...d,Dd->...D", r, projection, precision=PRECISION)
            write = lambda y: jnp.einsum("...D,Dd->...d", y, projection, precision=PRECISION)
        length = ids.shape[-1]
        if stream is None:
            tokens = jax.nn.one_hot(ids, config.vocab_size, dtype=jnp.float32)
            positions = jax.nn.one_hot(jnp.arange(length), config.max_seq_len + 1)
            embedded = apply_linear(config.token_embed, self._get("embed", "token"), tokens, width)
            stream = write(embedded + apply_linear(config.pos_embed, self._get("embed", "position"), positions, width))
        mask = (ids != config.pad_id)[..., None, :]
        if config.causal:
            mask = mask & jnp.tril(jnp.ones((length, length), dtype=bool))
        streams, hidden, deltas = {start: stream}, {}, {}
        for index in range(start, len(config.layers)):
            layer, module, x = config.layers[index], f"layer_{index}", read(stream)
            if isinstance(layer, AttentionSpec):
                delta, _ = self._attention(module, layer, x, mask, width)
            else:
                pre = apply_linear(layer.w_in, self._get(module, "w_in"), x)
                hidden[index] = activate(layer.activation, pre)
                delta = apply_linear(layer.w_out, self._get(module, "w_out"), hidden[index], width)
                deltas[index] = write(delta)
            stream = stream + write(delta)
            streams[index + 1] = stream
        logits = apply_linear(config.unembed, self._get("unembed", "w_u"), read(stream))
        return streams, hidden, deltas, (logits[..., 0] if config.numerical_output else logits)


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
    compressed by ``projection``); every call is jitted once per site and input shape."""

    compiled: CompiledModel
    projection: np.ndarray | None = None

    @functools.cached_property
    def _apply(self):
        config = self.compiled.config
        weights = {key.split("/", 1)[1]: {n: np.asarray(v) for n, v in value.items()}
                   for key, value in self.compiled.params.items()}
        transformed = hk.without_apply_rng(hk.transform(
            lambda ids, projection, start, stream: _Runner(config, weights)(ids, projection, start, stream)))
        return transformed.apply

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

        def at(params, ids, w, kind: str, index: int):
            streams, hidden, deltas, output = apply(params, ids, w, 0, None)
            if kind == "resid":
                return streams[index], output
            return deltas[index], hidden[index]

        return jax.jit(at, static_argnames=("kind", "index"))

    @functools.cached_property
    def _all(self):
        apply = self._apply
        return jax.jit(lambda params, ids, w: apply(params, ids, w, 0, None))

    def capture(self, ids: np.ndarray | jax.Array) -> Capture:
        """Every site at once (one jitted pass): streams, MLP hidden activations and deltas, output."""
        streams, hidden, deltas, output = self._all(self.compiled.params, jnp.asarray(ids, jnp.int32), self._w)
        return Capture(tuple(np.asarray(streams[k]) for k in sorted(streams)),
                       {i: np.asarray(h) for i, h in hidden.items()},
                       {i: np.asarray(h) for i, h in deltas.items()}, np.asarray(output))

    @functools.cached_property
    def _from(self):
        apply = self._apply

        def from_(params, ids, w, stream, start: int):
            return apply(params, ids, w, start, stream)[3]

        return jax.jit(from_, static_argnames=("start",))

    def activations(self, ids: np.ndarray | jax.Array, site: Site) -> jax.Array:
        """``[batch, T, width]``: the stream at a residual site, or what an MLP site adds to it."""
        check_site(self.compiled, site)
        return self._at(self.compiled.params, jnp.asarray(ids, jnp.int32), self._w, site.kind, site.index)[0]

    def hidden(self, ids: np.ndarray | jax.Array, site: Site) -> jax.Array:
        """``[batch, T, hidden]``: the hidden activations of an MLP site."""
        if site.kind != "mlp":
            raise ValueError(f"{site}: hidden activations exist at MLP sites only")
        check_site(self.compiled, site)
        return self._at(self.compiled.params, jnp.asarray(ids, jnp.int32), self._w, site.kind, site.index)[1]

    def output(self, ids: np.ndarray | jax.Array) -> jax.Array:
        """The model's output (logits, or values for a numerical output) on ``ids``."""
        return self._at(self.compiled.params, jnp.asarray(ids, jnp.int32), self._w, "resid", 0)[1]

    def spliced_output(self, ids: np.ndarray | jax.Array, site: Site, stream: np.ndarray | jax.Array) -> jax.Array:
        """The output when the stream at residual ``site`` is replaced by ``stream``
        (``[batch, T, width]``, e.g. an SAE's reconstruction) and the forward pass goes on."""
        if site.kind != "resid":
            raise ValueError(f"{site}: splicing replaces a residual snapshot; use Site('resid', k)")
        check_site(self.compiled, site)
        stream = jnp.asarray(stream, jnp.float32)
        if stream.shape[-1] != self.width:
            raise ValueError(f"spliced stream has width {stream.shape[-1]}; the model's stream has {self.width}")
        return self._from(self.compiled.params, jnp.asarray(ids, jnp.int32), self._w, stream, site.index)
