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

from compiler import CompiledModel
from compiler.model.config import AttentionSpec, LayerSpec, ModelConfig, SparseLinear
from compiler.model.tying import untied
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


def executed_layers(compiled: CompiledModel) -> tuple[LayerSpec, ...]:
    """The sub-layers in the order the forward pass runs them (a tied block once per iteration)."""
    config = compiled.config
    return tuple(config.layers[index] for index in config.layer_order)


def check_site(compiled: CompiledModel, site: Site) -> Site:
    """``site`` if the model has it, else a ValueError naming the valid range."""
    layers = executed_layers(compiled)
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
    new = tuple(at[i] for i in idx)
    return dataclasses.replace(spec, in_idx=new) if side == "in" else dataclasses.replace(spec, out_idx=new)


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
            # CompiledTransformer._attention adds the heads' outputs to a zero array shaped like its
            # input, so an attention step reads and writes the same rows.
            reads = _rows([s for h in layer.heads for s in (h.w_q, h.w_k, h.w_v)], "in", width)
            reads = writes = tuple(sorted(set(reads) | set(_rows([h.w_o for h in layer.heads], "out", width))))
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
    numbers as reading the whole ``r @ Wᵀ``, at a cost set by the sub-layer, not by D.
    """

    def __init__(self, config: ModelConfig, weights: dict[str, dict[str, np.ndarray]]):
        super().__init__(config, weights)
        self.steps, self.unembed_step = _plan(config)

    def __call__(self, ids: jax.Array, projection: jax.Array | None = None, start: int = 0,  # type: ignore[override]
                 stream: jax.Array | None = None, stop: int | None = None, logits: bool = True):
        """Streams of snapshots ``start..stop`` (the given ``stream`` at ``start``, or the embedding
        when ``start`` is 0 and none is given), MLP hidden activations and deltas, and the output
        (None unless ``logits`` and ``stop`` is the last snapshot)."""
        config = self.config
        width = config.residual_width
        stop = len(config.layers) if stop is None else stop
        # The parameter groups of CompiledTransformer, so Haiku names (and so params) match.
        self._groups = {module: _ParamGroup(values, name=module) for module, values in self.weights.items()}

        def read(r: jax.Array, rows: tuple[int, ...]) -> jax.Array:
            if projection is None:
                return r
            return jnp.einsum("...d,Dd->...D", r, projection[np.asarray(rows)], precision=PRECISION)

        def write(y: jax.Array, rows: tuple[int, ...]) -> jax.Array:
            if projection is None:
                return y
            return jnp.einsum("...D,Dd->...d", y, projection[np.asarray(rows)], precision=PRECISION)

        length = ids.shape[-1]
        if stream is None:
            tokens = jax.nn.one_hot(ids, config.vocab_size, dtype=jnp.float32)
            positions = jax.nn.one_hot(jnp.arange(length), config.max_seq_len + 1)
            embedded = apply_linear(config.token_embed, self._get("embed", "token"), tokens, width)
            embedded = embedded + apply_linear(config.pos_embed, self._get("embed", "position"), positions, width)
            stream = write(embedded, tuple(range(width)))
        mask = (ids != config.pad_id)[..., None, :]
        if config.causal:
            mask = mask & jnp.tril(jnp.ones((length, length), dtype=bool))
        streams, hidden, deltas = {start: stream}, {}, {}
        for index in range(start, stop):
            step = self.steps[index] if projection is not None else _Step(config.layers[index], (), ())
            layer, module = step.layer, f"layer_{index}"
            if isinstance(layer, AttentionSpec):
                if layer.heads:
                    x = read(stream, step.reads)
                    out_width = len(step.writes) if projection is not None else width
                    delta, _ = self._attention(module, layer, x, mask, out_width, self._get)
                    stream = stream + write(delta, step.writes)
            elif layer.w_in.shape[1]:
                x = read(stream, step.reads)
                pre = apply_linear(layer.w_in, self._get(module, "w_in"), x)
                hidden[index] = activate(layer.activation, pre)
                out_width = len(step.writes) if projection is not None else width
                deltas[index] = write(apply_linear(layer.w_out, self._get(module, "w_out"), hidden[index], out_width),
                                      step.writes)
                stream = stream + deltas[index]
            streams[index + 1] = stream
        output = None
        if logits and stop == len(config.layers):
            unembed = self.unembed_step.layer if projection is not None else config.unembed
            out = apply_linear(unembed, self._get("unembed", "w_u"), read(stream, self.unembed_step.reads))
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
        transformed = hk.without_apply_rng(hk.transform(
            lambda ids, projection, start, stream, stop=None, logits=True:
            _Runner(config, weights)(ids, projection, start, stream, stop, logits)))
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
            stop = index if kind == "resid" else index + 1
            streams, hidden, deltas, _ = apply(params, ids, w, 0, None, stop, False)
            if kind == "resid":
                return streams[index], None
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

    @functools.cached_property
    def _output(self):
        apply = self._apply
        return jax.jit(lambda params, ids, w: apply(params, ids, w, 0, None)[3])

    def output(self, ids: np.ndarray | jax.Array) -> jax.Array:
        """The model's output (logits, or values for a numerical output) on ``ids``."""
        return self._output(self.compiled.params, jnp.asarray(ids, jnp.int32), self._w)

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
