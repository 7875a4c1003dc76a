"""The forward pass of a `Network` with edges ablated, jitted once per shape bucket and vectorised
over edge sets.

`keep[p, s, t]` weighs the term of source `s` in the input of port `p` at position `t`:
1 uses the source's output in the running (patched) forward pass, 0 its reference value
`reference[s]` (what the ablation puts there: zero, a mean, another input's value; see
`compiler.lab.circuits.ablation`). A port's input is

    x_p[t] = sum over upstream s of keep[p, s, t] * out_s[t] + (1 - keep[p, s, t]) * ref_s[t]

so all-ones `keep` is the model itself (up to float rounding of the sum), a zero at one
`(p, s, t)` ablates one edge at one position, and a zero for every `t` ablates the edge.
Intermediate values of `keep` are allowed: the gradient at all-ones is what attribution patching
(EAP) reads (`keep_gradient`). `sweep` runs many keep masks, vmapped in chunks, and reads each
patched output as changed-output counts and divergences (`readout`) before it leaves the device.

**Shape buckets.** XLA compiles one program per array shape, and on these small networks a
compile costs far more than the patched runs it serves. So a network runs in a padded *layout*
(`layout`): its sub-layers packed into blocks of (attention, MLP) in forward order, every
dimension (blocks, heads per block, head width, MLP width, residual width, vocabulary, output
columns) rounded up to a power of two, and positions and inputs to the next of 1, 2, 3, 4, 6,
8, 12, 16, ... (`bucket`: powers of two and 1.5 times them). Padding is exact zeros: a padded head or MLP writes 0, a padded
position holds PAD (masked as a key, never scored), a padded output column is masked out of
every readout, and a port reads a padded or downstream source with keep 1, adding 0. The blocks
run in a `lax.scan`, so a compile does not grow with depth. Networks of one bucket (programs,
variants, ablations, methods) share every compiled program, and JAX's persistent compilation
cache (`jax_compilation_cache_dir`) carries them to later processes.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from compiler.errors import LabError
from compiler.lab.circuits import readout
from compiler.lab.circuits.ablation import ablated_terms
from compiler.lab.circuits.components import AttentionLayer, MLPLayer, Network
from compiler.model.config import MASKED_LOGIT
from craft.blocks import activate

__all__ = ["CHUNK", "SWEEP_SHARPNESS", "Layout", "Prepared", "Sweep", "bucket", "divergence_of", "edge_keeps", "forward",
           "forward_many", "keep_gradient", "layout", "prepare", "source_outputs", "sweep"]

PRECISION = jax.lax.Precision.HIGHEST
CHUNK = 16  # keep masks per vmapped run
# The sharpness values (`readout.divergence`) a sweep reads by default: the plain and the
# sharpened patching methods' (`methods`), so that they and the circuit share one sweep.
SWEEP_SHARPNESS = (1.0, readout.SHARP)


def bucket(n: int) -> int:
    """The smallest of 1, 2, 3, 4, 6, 8, 12, 16, 24, ... (powers of two and 1.5 times them) >= n."""
    if n <= 1:
        return 1
    power = 2 ** math.floor(math.log2(n))
    for size in (power, 3 * power // 2, 2 * power):
        if size >= n:
            return size
    raise AssertionError(n)  # unreachable: 2 * power > n


def _power(n: int) -> int:
    """The smallest power of two >= n."""
    return 1 << max(n - 1, 0).bit_length()


class Shape(NamedTuple):
    """A bucket: the padded dimensions every network in it is run with."""

    blocks: int
    heads: int
    head_width: int
    hidden: int
    width: int
    vocab: int
    positions: int
    outputs: int
    activations: tuple[str, ...]


@dataclasses.dataclass(frozen=True, eq=False)
class Layout:
    """A network in its bucket: the padded weights (device arrays, arguments of the compiled
    programs) and where each real source and port sits among the padded ones."""

    net: Network
    shape: Shape
    weights: tuple
    source_slot: np.ndarray  # [S] padded index of each source
    port_slot: np.ndarray  # [P] padded index of each port
    outputs: int  # real output columns

    @property
    def sources(self) -> int:
        return 2 + self.shape.blocks * (self.shape.heads + 1)

    @property
    def ports(self) -> int:
        return self.shape.blocks * (3 * self.shape.heads + 1) + 1

    @staticmethod
    def positions(length: int) -> int:
        """The padded number of positions for inputs of `length` positions."""
        return bucket(max(length, 6))

    @staticmethod
    def batch(count: int) -> int:
        """The padded number of inputs for `count` inputs: at least 48, so that datasets of 12,
        24 and 48 inputs share programs (a padded input is PAD everywhere and never scored)."""
        return bucket(max(count, 48))

    def pad_ids(self, ids: np.ndarray | jax.Array) -> np.ndarray:
        """`[B, T]` -> `[B', T']`, padded with PAD."""
        ids = np.asarray(ids, np.int32)
        rows, length = ids.shape
        return np.pad(ids, ((0, self.batch(rows) - rows), (0, self.positions(length) - length)),
                      constant_values=self.net.pad_id)

    def pad_keeps(self, keeps: np.ndarray, by_position: bool | None = None) -> np.ndarray:
        """Real keep masks `[M, P, S, T]` -> padded: each edge's entries copied, everything else 1
        (a padded source writes 0, a downstream one has not written).

        Masks the same at every position (`by_position` False; None: whenever they are) become
        `[M, P', S']`, which the programs read with one matrix product per port group instead
        of one per position (7 times faster on the CPU); others `[M, P', S', T']`.
        """
        keeps = np.asarray(keeps, np.float32)
        length = keeps.shape[-1]
        ports, sources = self.net.edge_index
        values = keeps[:, ports, sources, :]  # [M, E, T]
        if by_position is None:
            by_position = not np.all(values == values[..., :1])
        if not by_position:
            padded = np.ones((len(keeps), self.ports, self.sources), np.float32)
            padded[:, self.port_slot[ports], self.source_slot[sources]] = values[..., 0]
            return padded
        padded = np.ones((len(keeps), self.ports, self.sources, self.positions(length)), np.float32)
        padded[:, self.port_slot[ports], self.source_slot[sources], :length] = values
        return padded

    def pad_sources(self, values: np.ndarray | jax.Array) -> np.ndarray:
        """Per-source values `[S, B, T, d]` -> `[S', B, T', D']` (zeros elsewhere)."""
        values = np.asarray(values, np.float32)
        count, batch, length, width = values.shape
        padded = np.zeros((self.sources, self.batch(batch), self.positions(length), self.shape.width), np.float32)
        padded[self.source_slot, :batch, :length, :width] = values
        return padded

    def real_sources(self, padded: jax.Array, batch: int, length: int) -> jax.Array:
        """Padded per-source values -> the network's `[S, B, T, d]`."""
        return jnp.asarray(np.asarray(padded)[self.source_slot, :batch, :length, : self.net.width])

    @functools.cached_property
    def statics(self) -> tuple[jax.Array, jax.Array]:
        """The PAD id and whether attention is causal, as program arguments."""
        return jnp.int32(self.net.pad_id), jnp.bool_(self.net.causal)

    @functools.cached_property
    def thresholds(self) -> tuple[jax.Array, jax.Array]:
        """The empty threshold (0 when there is none) and the numerical tolerance, as program
        arguments."""
        threshold = self.net.empty_threshold
        return jnp.float32(0.0 if threshold is None else threshold), jnp.float32(self.net.numerical_tolerance)

    @functools.cached_property
    def valid(self) -> jax.Array:
        """`[N']` bool: the real output columns."""
        return jnp.asarray(np.arange(self.shape.outputs) < self.outputs)


def _blocks(net: Network) -> list[list[int | None]]:
    """Sub-layers packed into blocks `[attention index or None, MLP index or None]`, in order."""
    blocks: list[list[int | None]] = []
    for index, layer in enumerate(net.layers):
        slot = 0 if isinstance(layer, AttentionLayer) else 1
        if not blocks or blocks[-1][slot] is not None or (slot == 0 and blocks[-1][1] is not None):
            blocks.append([None, None])
        blocks[-1][slot] = index
    return blocks


@functools.lru_cache(maxsize=64)
def layout(net: Network) -> Layout:
    """The padded layout of `net` (cached per network object).

    Buckets are coarse on purpose, since a compile costs seconds and a patched run of these
    networks milliseconds: blocks, heads, the narrow dimensions (head width, vocabulary,
    output columns, at least 16) and the wide ones (residual and MLP width, one size, at least
    32) each round up to a power of two (blocks at least 2), positions to `bucket` (at least 6).
    """
    blocks = _blocks(net)
    attention = [layer for layer in net.layers if isinstance(layer, AttentionLayer)]
    mlps = [layer for layer in net.layers if isinstance(layer, MLPLayer)]
    activations = tuple(sorted({layer.activation for layer in mlps})) or ("relu",)
    halves = [layer.w_in.shape[1] // 2 if layer.activation == "bilinear" else layer.w_in.shape[1] for layer in mlps]
    narrow = _power(max([max(layer.w_q.shape[2], layer.w_v.shape[2]) for layer in attention]
                        + [net.tok_embed.shape[0], _columns(net).shape[1], 16]))
    wide = _power(max(halves + [net.width, 32]))
    shape = Shape(
        blocks=_power(max(len(blocks), 2)),
        heads=_power(max([len(layer.w_q) for layer in attention] or [1])),
        head_width=narrow,
        hidden=2 * wide if "bilinear" in activations else wide,
        width=wide,
        vocab=narrow,
        positions=bucket(max(net.pos_embed.shape[0], 6)),
        outputs=narrow,
        activations=activations,
    )
    L, H, K, M, D = shape.blocks, shape.heads, shape.head_width, shape.hidden, shape.width
    w_q, w_k, w_v = (np.zeros((L, H, D, K), np.float32) for _ in range(3))
    w_o = np.zeros((L, H, K, D), np.float32)
    w_in, w_out = np.zeros((L, D, M), np.float32), np.zeros((L, M, D), np.float32)
    act = np.zeros(L, np.int32)
    source_slot = [0, 1]
    port_slot: list[int] = []
    for b, (a, m) in enumerate(blocks):
        base_source, base_port = 2 + b * (H + 1), b * (3 * H + 1)
        if a is not None:
            heads_layer = net.layers[a]
            assert isinstance(heads_layer, AttentionLayer)
            heads, d = len(heads_layer.w_q), net.width
            w_q[b, :heads, :d, : heads_layer.w_q.shape[2]] = heads_layer.w_q
            w_k[b, :heads, :d, : heads_layer.w_k.shape[2]] = heads_layer.w_k
            w_v[b, :heads, :d, : heads_layer.w_v.shape[2]] = heads_layer.w_v
            w_o[b, :heads, : heads_layer.w_o.shape[1], :d] = heads_layer.w_o
            source_slot += [base_source + h for h in range(heads)]
            port_slot += [base_port + 3 * h + j for h in range(heads) for j in range(3)]
        if m is not None:
            mlp = net.layers[m]
            assert isinstance(mlp, MLPLayer)
            _place_mlp(mlp, w_in[b], w_out[b], net.width, M)
            act[b] = activations.index(mlp.activation)
            source_slot.append(base_source + H)
            port_slot.append(base_port + 3 * H)
    port_slot.append(L * (3 * H + 1))
    tok = np.zeros((shape.vocab, D), np.float32)
    tok[: net.tok_embed.shape[0], : net.width] = net.tok_embed
    pos = np.zeros((shape.positions, D), np.float32)
    pos[: net.pos_embed.shape[0], : net.width] = net.pos_embed
    columns = _columns(net)
    unembed = np.zeros((D, shape.outputs), np.float32)
    unembed[: net.width, : columns.shape[1]] = columns
    weights = tuple(jnp.asarray(a) for a in (tok, pos, w_q, w_k, w_v, w_o, w_in, w_out, act, unembed, _norm_args(net)))
    return Layout(net, shape, weights, np.asarray(source_slot), np.asarray(port_slot), columns.shape[1])


def _norm_args(net: Network) -> np.ndarray:
    """The norm as a program argument: `[on, centred, gain, eps, real width]` (networks with and
    without a norm, of either kind, share the compiled programs of their bucket)."""
    norm = net.norm
    if norm is None:
        return np.asarray([0.0, 0.0, 1.0, 1.0, net.width], np.float32)
    return np.asarray([1.0, float(norm.kind == "layernorm"), norm.scale, norm.eps, net.width], np.float32)


def _normalise(norm: jax.Array, x: jax.Array) -> jax.Array:
    """A port's input through the network's pre-norm (`compiler.model.transformer.normalise`),
    over the real residual coordinates only (the padded ones hold 0 and are read by no weight);
    the input itself where the network has no norm."""
    on, centred, gain, eps, width = norm[0], norm[1], norm[2], norm[3], norm[4]
    real = jnp.arange(x.shape[-1]) < width
    mean = centred * x.sum(axis=-1, keepdims=True) / width
    x_c = jnp.where(real, x - mean, 0.0)
    scaled = x_c * (gain * jax.lax.rsqrt(jnp.square(x_c).sum(axis=-1, keepdims=True) / width + eps))
    return jnp.where(on > 0, scaled, x)


def _columns(net: Network) -> np.ndarray:
    return np.asarray(net.unembed)[:, net.columns]


def _place_mlp(layer: MLPLayer, w_in: np.ndarray, w_out: np.ndarray, d: int, hidden: int) -> None:
    """Write an MLP's weights into its padded slots (a bilinear MLP's two halves each padded to
    half the bucket, so the gate still multiplies the right units)."""
    if layer.activation == "bilinear":
        half, padded = layer.w_in.shape[1] // 2, hidden // 2
        w_in[:d, :half] = layer.w_in[:, :half]
        w_in[:d, padded : padded + half] = layer.w_in[:, half:]
        w_out[:half, :d] = layer.w_out
    else:
        w_in[:d, : layer.w_in.shape[1]] = layer.w_in
        w_out[: layer.w_out.shape[0], :d] = layer.w_out


def _activate(shape: Shape, index: jax.Array, hidden: jax.Array) -> jax.Array:
    """The block's activation (`index` into `shape.activations`), at the padded hidden width."""

    def branch(name: str):
        def run(h: jax.Array) -> jax.Array:
            out = activate(name, h)
            return jnp.pad(out, [(0, 0)] * (out.ndim - 1) + [(0, h.shape[-1] - out.shape[-1])])
        return run

    if len(shape.activations) == 1:
        return branch(shape.activations[0])(hidden)
    return jax.lax.switch(index, [branch(name) for name in shape.activations], hidden)


def _read(keep: jax.Array, outs: jax.Array, ref: jax.Array) -> jax.Array:
    """Inputs of ports `keep` `[p, S']` (or `[p, S', T]` per position) -> `[p, B, T, D]`."""
    spec = "ps,sbtd->pbtd" if keep.ndim == 2 else "pst,sbtd->pbtd"
    own = jnp.einsum(spec, keep, outs, precision=PRECISION)
    return own + jnp.einsum(spec, 1.0 - keep, ref, precision=PRECISION)


def _run(shape: Shape, weights: tuple, keep: jax.Array, ids: jax.Array, ref: jax.Array, pad_id: jax.Array,
         causal: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The padded forward pass: `(logits [B, T, N'], source outputs [S', B, T, D'])`."""
    tok, pos, w_q, w_k, w_v, w_o, w_in, w_out, act, unembed, norm = weights
    L, H = shape.blocks, shape.heads
    batch, length = ids.shape
    sources = 2 + L * (H + 1)
    outs = jnp.zeros((sources, batch, length, shape.width), jnp.float32)
    outs = outs.at[0].set(tok[ids]).at[1].set(jnp.broadcast_to(pos[:length], (batch, length, shape.width)))
    mask = (ids != pad_id)[:, None, None, :] & (jnp.tril(jnp.ones((length, length), bool)) | ~causal)
    per_block = 3 * H + 1

    def block(outs: jax.Array, xs: tuple) -> tuple[jax.Array, None]:
        keep_b, q_b, k_b, v_b, o_b, in_b, out_b, act_b, index = xs
        base = 2 + index * (H + 1)
        x = _normalise(norm, _read(keep_b[: 3 * H], outs, ref)).reshape((H, 3, batch, length, shape.width))
        q = jnp.einsum("hbtd,hde->hbte", x[:, 0], q_b, precision=PRECISION)
        k = jnp.einsum("hbtd,hde->hbte", x[:, 1], k_b, precision=PRECISION)
        v = jnp.einsum("hbtd,hde->hbte", x[:, 2], v_b, precision=PRECISION)
        logits = jnp.einsum("hbte,hbse->bhts", q, k, precision=PRECISION)
        pattern = jax.nn.softmax(jnp.where(mask, logits, MASKED_LOGIT), axis=-1)
        mixed = jnp.einsum("bhts,hbse->hbte", pattern, v, precision=PRECISION)
        written = jnp.einsum("hbte,hed->hbtd", mixed, o_b, precision=PRECISION)
        outs = jax.lax.dynamic_update_slice(outs, written, (base, 0, 0, 0))
        x = _normalise(norm, _read(keep_b[3 * H :], outs, ref)[0])
        hidden = _activate(shape, act_b, jnp.einsum("btd,dh->bth", x, in_b, precision=PRECISION))
        written = jnp.einsum("bth,hd->btd", hidden, out_b, precision=PRECISION)
        outs = jax.lax.dynamic_update_slice(outs, written[None], (base + H, 0, 0, 0))
        return outs, None

    keep_blocks = keep[: L * per_block].reshape((L, per_block) + keep.shape[1:])
    outs, _ = jax.lax.scan(block, outs, (keep_blocks, w_q, w_k, w_v, w_o, w_in, w_out, act, jnp.arange(L)))
    final = _normalise(norm, _read(keep[L * per_block :], outs, ref)[0])
    return jnp.einsum("btd,dn->btn", final, unembed, precision=PRECISION), outs


@functools.partial(jax.jit, static_argnames=("shape",))
def _forward(shape: Shape, weights: tuple, keep: jax.Array, ids: jax.Array, ref: jax.Array, pad_id: jax.Array,
             causal: jax.Array) -> tuple[jax.Array, jax.Array]:
    return _run(shape, weights, keep, ids, ref, pad_id, causal)


def forward(net: Network, keep: jax.Array, ids: jax.Array, reference: jax.Array) -> jax.Array:
    """Scored output `[B, T, n]` (n = 1 for a numerical output) with edges weighted by `keep`
    `[P, S, T]` and ablated terms taken from `reference` `[S, B, T, d]`."""
    lay = layout(net)
    length = np.shape(ids)[-1]
    logits, _ = _forward(lay.shape, lay.weights, jnp.asarray(lay.pad_keeps(np.asarray(keep)[None])[0]),
                         jnp.asarray(lay.pad_ids(ids)), jnp.asarray(lay.pad_sources(reference)), *lay.statics)
    return jnp.asarray(np.asarray(logits)[: np.shape(ids)[0], :length, : lay.outputs])


def source_outputs(net: Network, ids: jax.Array) -> jax.Array:
    """What every source writes on the unpatched model, `[S, B, T, d]`."""
    lay = layout(net)
    return lay.real_sources(_unpatched_sources(lay, jnp.asarray(lay.pad_ids(ids))), *np.shape(ids))


def _unpatched_sources(lay: Layout, padded: jax.Array) -> jax.Array:
    """What every padded source writes on the unpatched model for padded ids: `[S', B', T', D']`."""
    keep = jnp.ones((lay.ports, lay.sources), jnp.float32)
    zeros = jnp.zeros((lay.sources,) + padded.shape + (lay.shape.width,), jnp.float32)
    return _forward(lay.shape, lay.weights, keep, padded, zeros, *lay.statics)[1]


@dataclasses.dataclass(frozen=True, eq=False)
class Prepared:
    """A network's sampled inputs, ablation references and clean output in its padded layout:
    what `sweep` and `keep_gradient` run on. `length` is the real number of positions."""

    layout: Layout
    ids: jax.Array  # [B', T']
    reference: jax.Array  # [S', B', T', D']
    clean: jax.Array  # [B', T', N']
    scored: jax.Array  # [B', T'] bool, False at padded inputs and positions
    length: int


_ablated_terms = jax.jit(ablated_terms)


def prepare(net: Network, ids: np.ndarray, kind: int, order: np.ndarray) -> tuple[Prepared, jax.Array]:
    """Run the unpatched network on `ids` once, build the ablation's reference values (`kind`
    and `order` as `ablation.ablated_terms` takes them) and the clean output, all padded.

    Returns:
        The `Prepared` inputs (with `clean` and `scored`) and the real reference `[S, B, T, d]`.
    """
    lay = layout(net)
    ids = np.asarray(ids, np.int32)
    rows = lay.pad_ids(ids)
    padded = jnp.asarray(rows)
    outs = _unpatched_sources(lay, padded)
    order = np.concatenate([np.asarray(order), np.arange(len(ids), len(rows))])  # a padded input keeps its own
    ref = _ablated_terms(jnp.int32(kind), jnp.asarray(rows != net.pad_id, jnp.float32), jnp.asarray(order, jnp.int32), outs)
    scored = rows != net.pad_id
    scored[:, 0] = False
    empty = Prepared(lay, padded, ref, jnp.zeros(padded.shape + (lay.shape.outputs,), jnp.float32), jnp.asarray(scored),
                     ids.shape[-1])
    # The clean output comes through the same vmapped program as every patched run: a model
    # with a near-tie (a GD projection) can flip an output on the float rounding between two
    # compiled programs.
    keep = np.ones((1, len(net.ports), len(net.sources), ids.shape[-1]), np.float32)
    clean = jnp.asarray(sweep(empty, keep).outputs[0])
    return dataclasses.replace(empty, clean=clean), lay.real_sources(ref, *ids.shape)


@dataclasses.dataclass(frozen=True)
class Sweep:
    """Per keep mask: the padded patched outputs, how many scored outputs changed, and the
    divergence from the clean output at each requested sharpness `[M, K]`."""

    outputs: np.ndarray  # [M, B, T', N']
    changed: np.ndarray  # [M]
    divergence: np.ndarray  # [M, K]


def _readout_args(p: Prepared) -> tuple:
    return (p.clean, p.scored, p.layout.valid, *p.layout.thresholds)


def _divergences(numerical: bool, threshold_on: bool, out: jax.Array, clean: jax.Array, scored: jax.Array,
                 valid: jax.Array, threshold: jax.Array, sharpness: jax.Array) -> jax.Array:
    """`[..., K]`: `readout.divergence` at each of `sharpness` `[K]`."""
    cut = threshold if threshold_on else None
    return jnp.stack([readout.divergence(clean, out, scored, numerical, cut, sharpness[k], valid)
                      for k in range(sharpness.shape[0])], axis=-1)


@functools.partial(jax.jit, static_argnames=("shape", "numerical", "threshold_on"))
def _sweep(shape: Shape, numerical: bool, threshold_on: bool, weights: tuple, keeps: jax.Array, ids: jax.Array,
           ref: jax.Array, pad_id: jax.Array, causal: jax.Array, clean: jax.Array, scored: jax.Array,
           valid: jax.Array, threshold: jax.Array, tolerance: jax.Array, sharpness: jax.Array):
    out = jax.vmap(lambda keep: _run(shape, weights, keep, ids, ref, pad_id, causal)[0])(keeps)
    counts = readout.changed(clean, out, scored, numerical, threshold if threshold_on else None, tolerance,
                             valid).sum(axis=(-1, -2))
    return out, counts, _divergences(numerical, threshold_on, out, clean, scored, valid, threshold, sharpness)


def sweep(p: Prepared, keeps: np.ndarray, sharpness: Sequence[float] = SWEEP_SHARPNESS, chunk: int = CHUNK) -> Sweep:
    """Run each of `keeps` (real masks `[M, P, S, T]`) on `p`, vmapped in chunks of `chunk`
    masks (the last one padded with all-ones masks, so every chunk reuses one program).

    Divergences are read at one or two `sharpness` values: the compiled program always takes
    two (one more compile per bucket for any other count), so one value is run twice.
    """
    if not 1 <= len(sharpness) <= 2:
        raise LabError(f"sweep reads divergences at one or two sharpness values, got {tuple(sharpness)}")
    lay = p.layout
    net = lay.net
    before = (lay.shape, net.numerical, net.empty_threshold is not None, lay.weights)
    after = (p.ids, p.reference, *lay.statics, *_readout_args(p),
             jnp.asarray((tuple(sharpness) * 2)[:2], jnp.float32))
    outputs, counts, divergences = [], [], []
    for start in range(0, len(keeps), chunk):
        part = lay.pad_keeps(keeps[start : start + chunk])
        size = len(part)
        if size < chunk:
            part = np.concatenate([part, np.ones((chunk - size,) + part.shape[1:], np.float32)])
        out, count, divergence = _sweep(*before, jnp.asarray(part), *after)
        outputs.append(np.asarray(out)[:size])
        counts.append(np.asarray(count)[:size])
        divergences.append(np.asarray(divergence)[:size, : len(sharpness)])
    if not outputs:
        return Sweep(np.zeros((0,)), np.zeros((0,), np.int64), np.zeros((0, len(sharpness))))
    return Sweep(np.concatenate(outputs), np.concatenate(counts).astype(np.int64), np.concatenate(divergences))


@functools.partial(jax.jit, static_argnames=("shape", "numerical", "threshold_on"))
def _patched_divergence(shape: Shape, numerical: bool, threshold_on: bool, weights: tuple, keep: jax.Array,
                        ids: jax.Array, ref: jax.Array, pad_id: jax.Array, causal: jax.Array, clean: jax.Array,
                        scored: jax.Array, valid: jax.Array, threshold: jax.Array, sharpness: jax.Array) -> jax.Array:
    out = _run(shape, weights, keep, ids, ref, pad_id, causal)[0]
    return _divergences(numerical, threshold_on, out, clean, scored, valid, threshold, sharpness)


def divergence_of(p: Prepared, keep: np.ndarray, sharpness: float) -> float:
    """The divergence (`readout.divergence`) of one patched run, keep `[P, S, T]`, from the
    clean output: one unvmapped program, for methods that decide one mask at a time (ACDC)."""
    lay = p.layout
    net = lay.net
    clean, scored, valid, threshold, _ = _readout_args(p)
    value = _patched_divergence(lay.shape, net.numerical, net.empty_threshold is not None, lay.weights,
                                jnp.asarray(lay.pad_keeps(np.asarray(keep)[None])[0]), p.ids, p.reference,
                                *lay.statics, clean, scored, valid, threshold, jnp.asarray([sharpness], jnp.float32))
    return float(value[0])


def forward_many(net: Network, keeps: np.ndarray, ids: jax.Array, reference: jax.Array, chunk: int = CHUNK) -> np.ndarray:
    """`forward` for each of `keeps` (`[M, P, S, T]`), vmapped in chunks of `chunk` masks: `[M, B, T, n]`."""
    lay = layout(net)
    length = np.shape(ids)[-1]
    padded = jnp.asarray(lay.pad_ids(ids))
    empty = Prepared(lay, padded, jnp.asarray(lay.pad_sources(reference)),
                     jnp.zeros(padded.shape + (lay.shape.outputs,), jnp.float32), jnp.zeros(padded.shape, bool), length)
    return sweep(empty, keeps, chunk=chunk).outputs[:, : np.shape(ids)[0], :length, : lay.outputs]


@functools.partial(jax.jit, static_argnames=("shape", "numerical", "threshold_on", "deviation"))
def _gradient(shape: Shape, numerical: bool, threshold_on: bool, weights: tuple, keep: jax.Array, ids: jax.Array,
              ref: jax.Array, pad_id: jax.Array, causal: jax.Array, clean: jax.Array, scored: jax.Array,
              valid: jax.Array, threshold: jax.Array, deviation: bool = False) -> jax.Array:
    cut = threshold if threshold_on else None
    answer = readout.answer(clean, cut, valid)

    def metric(keep: jax.Array) -> jax.Array:
        out = _run(shape, weights, keep, ids, ref, pad_id, causal)[0]
        if numerical and deviation:
            return readout.numerical_deviation(out, clean, scored)
        return readout.answer_log_probability(out, answer, scored, numerical, cut, valid)

    return jax.grad(metric)(keep)


def keep_gradient(p: Prepared, per_position: bool = False, keep: float = 1.0, deviation: bool = False) -> np.ndarray:
    """Per edge `[E]` (or per edge and position `[E, T]`), the gradient of
    `readout.answer_log_probability` with the clean output's answers, taken where every edge's
    keep weight is `keep`: at 1 (the unpatched model) minus the first-order effect of ablating
    it, what attribution patching reads; at a `keep` between 0 and 1, a point of the path that
    integrated gradients average over. With `deviation`, a numerical output's metric is
    `readout.numerical_deviation` instead (its gradient at `keep` 1 is undefined)."""
    lay = p.layout
    net = lay.net
    shape = (lay.ports, lay.sources) + ((p.ids.shape[-1],) if per_position else ())
    clean, scored, valid, threshold, _ = _readout_args(p)
    grad = np.asarray(_gradient(lay.shape, net.numerical, net.empty_threshold is not None, lay.weights,
                                jnp.full(shape, keep, jnp.float32), p.ids, p.reference, *lay.statics, clean, scored, valid,
                                threshold, deviation))
    ports, sources = net.edge_index
    per_edge = grad[lay.port_slot[ports], lay.source_slot[sources]]
    return per_edge[:, : p.length] if per_position else per_edge


def edge_keeps(net: Network, ablated: np.ndarray, length: int) -> np.ndarray:
    """All-ones masks `[len(ablated), P, S, T]` with, in mask i, the edges `ablated[i]` (a
    boolean `[E]` row, or `[E, T]` for per-position edges) set to 0."""
    ports, sources = net.edge_index
    ablated = np.asarray(ablated, bool)
    if ablated.ndim == 2:
        ablated = np.repeat(ablated[:, :, None], length, axis=2)
    keeps = np.ones((len(ablated), len(net.ports), len(net.sources), length), np.float32)
    rows, edges, positions = np.nonzero(ablated)
    keeps[rows, ports[edges], sources[edges], positions] = 0.0
    return keeps
