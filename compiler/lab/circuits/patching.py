"""The forward pass of a `Network` with edges ablated, jitted and vectorised over edge sets.

`keep[p, s, t]` weighs the term of source `s` in the input of port `p` at position `t`:
1 uses the source's output in the running (patched) forward pass, 0 its reference value
`reference[s]` (what the ablation puts there: zero, a mean, another input's value; see
`compiler.lab.circuits.ablation`). A port's input is

    x_p[t] = sum over upstream s of keep[p, s, t] * out_s[t] + (1 - keep[p, s, t]) * ref_s[t]

so all-ones `keep` is the model itself (up to float rounding of the sum), a zero at one
`(p, s, t)` ablates one edge at one position, and a zero for every `t` ablates the edge.
Intermediate values of `keep` are allowed: the gradient at all-ones is what attribution patching
(EAP) reads. `forward_many` vmaps over a leading axis of keep masks and runs them in chunks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from compiler.lab.circuits.components import AttentionLayer, Network
from compiler.model.config import MASKED_LOGIT
from craft.blocks import activate

PRECISION = jax.lax.Precision.HIGHEST


def source_outputs(net: Network, ids: jax.Array) -> jax.Array:
    """What every source writes on the unpatched model, `[S, B, T, d]`."""
    keep = jnp.ones((len(net.ports), len(net.sources), ids.shape[-1]), jnp.float32)
    zeros = jnp.zeros((len(net.sources),) + ids.shape + (net.width,), jnp.float32)
    return _run(net)(keep, ids, zeros)[1]


def _mask(pad_id: int, causal: bool, ids: jax.Array) -> jax.Array:
    length = ids.shape[-1]
    mask = (ids != pad_id)[:, None, None, :]  # [B, 1, 1, T]: heads, queries broadcast
    if causal:
        mask = mask & jnp.tril(jnp.ones((length, length), dtype=bool))
    return mask


def _signature(net: Network) -> tuple:
    """What the compiled forward pass depends on besides the weights' values: networks with
    the same signature and weight shapes share one compiled program."""
    kinds = tuple((isinstance(l, AttentionLayer), getattr(l, "activation", None)) for l in net.layers)
    columns = (net.columns.start, net.columns.stop, net.columns.step)
    return kinds, net.upstream_counts, columns, net.causal, net.pad_id


@functools.lru_cache(maxsize=64)
def _weights(net: Network) -> tuple:
    """The network's weights as device arrays, passed to the compiled program as arguments
    (closed-over constants would make every network, and every variant, compile afresh)."""
    layers = tuple(
        tuple(jnp.asarray(a) for a in ((l.w_q, l.w_k, l.w_v, l.w_o) if isinstance(l, AttentionLayer) else (l.w_in, l.w_out)))
        for l in net.layers
    )
    return jnp.asarray(net.tok_embed), jnp.asarray(net.pos_embed), layers, jnp.asarray(net.unembed)


@functools.lru_cache(maxsize=16)
def _program(signature: tuple) -> Callable:
    """`program(weights, keep, ids, reference) -> (output [B, T, n], source outputs [S, B, T, d])`."""
    kinds, counts, (start, stop, step), causal, pad_id = signature
    columns = slice(start, stop, step)

    def read(keep_p: jax.Array, outs: list[jax.Array], ref: jax.Array, count: int) -> jax.Array:
        """Inputs of ports sharing `count` upstream sources: keep_p `[P', count, T]` -> `[P', B, T, d]`."""
        stacked = jnp.stack(outs[:count])  # [s, B, T, d]
        own = jnp.einsum("pst,sbtd->pbtd", keep_p, stacked, precision=PRECISION)
        return own + jnp.einsum("pst,sbtd->pbtd", 1.0 - keep_p, ref[:count], precision=PRECISION)

    def run(weights: tuple, keep: jax.Array, ids: jax.Array, ref: jax.Array) -> tuple[jax.Array, jax.Array]:
        tok, pos, layers, unembed = weights
        length = ids.shape[-1]
        outs = [tok[ids], jnp.broadcast_to(pos[:length], ids.shape + (pos.shape[1],))]
        mask = _mask(pad_id, causal, ids)
        port = 0
        for (is_attention, activation), layer in zip(kinds, layers):
            count = counts[port]
            if is_attention:
                w_q, w_k, w_v, w_o = layer
                heads = w_q.shape[0]
                x = read(keep[port : port + 3 * heads, :count], outs, ref, count)
                x = x.reshape((heads, 3) + x.shape[1:])  # [H, qkv, B, T, d]
                q = jnp.einsum("hbtd,hde->hbte", x[:, 0], w_q, precision=PRECISION)
                k = jnp.einsum("hbtd,hde->hbte", x[:, 1], w_k, precision=PRECISION)
                v = jnp.einsum("hbtd,hde->hbte", x[:, 2], w_v, precision=PRECISION)
                logits = jnp.einsum("hbte,hbse->bhts", q, k, precision=PRECISION)
                pattern = jax.nn.softmax(jnp.where(mask, logits, MASKED_LOGIT), axis=-1)
                mixed = jnp.einsum("bhts,hbse->hbte", pattern, v, precision=PRECISION)
                written = jnp.einsum("hbte,hed->hbtd", mixed, w_o, precision=PRECISION)
                outs += list(written)
                port += 3 * heads
            else:
                w_in, w_out = layer
                x = read(keep[port : port + 1, :count], outs, ref, count)[0]
                hidden = activate(activation, jnp.einsum("btd,dh->bth", x, w_in, precision=PRECISION))
                outs.append(jnp.einsum("bth,hd->btd", hidden, w_out, precision=PRECISION))
                port += 1
        final = read(keep[port : port + 1, : counts[port]], outs, ref, counts[port])[0]
        logits = jnp.einsum("btd,dn->btn", final, unembed, precision=PRECISION)
        return logits[..., columns], jnp.stack(outs)

    return jax.jit(run)


def _run(net: Network) -> Callable:
    """`run(keep, ids, reference) -> (output [B, T, n], source outputs [S, B, T, d])`, jitted."""
    program, weights = _program(_signature(net)), _weights(net)
    return lambda keep, ids, ref: program(weights, keep, ids, ref)


def forward(net: Network, keep: jax.Array, ids: jax.Array, reference: jax.Array) -> jax.Array:
    """Scored output `[B, T, n]` (n = 1 for a numerical output) with edges weighted by `keep`."""
    return _run(net)(keep, ids, reference)[0]


@functools.lru_cache(maxsize=16)
def _many_program(signature: tuple) -> Callable:
    program = _program(signature)
    return jax.jit(jax.vmap(lambda weights, keep, ids, ref: program(weights, keep, ids, ref)[0], in_axes=(None, 0, None, None)))


def _many(net: Network) -> Callable:
    program, weights = _many_program(_signature(net)), _weights(net)
    return lambda keeps, ids, ref: program(weights, keeps, ids, ref)


def forward_many(
    net: Network, keeps: np.ndarray, ids: jax.Array, reference: jax.Array, chunk: int = 16,
    reduce: Callable[[jax.Array], jax.Array] | None = None,
) -> np.ndarray:
    """`forward` for each of `keeps` (`[E, P, S, T]`), vmapped in chunks of `chunk` masks.

    `reduce` maps one chunk's outputs `[c, B, T, n]` to something smaller (e.g. per-mask
    mismatch counts) before it leaves the device; the chunks' results are concatenated.
    The last chunk is padded to `chunk` masks so every chunk reuses one compiled program.
    """
    run = _many(net)
    results = []
    for start in range(0, len(keeps), chunk):
        part = np.asarray(keeps[start : start + chunk], np.float32)
        size = len(part)
        if size < chunk:
            part = np.concatenate([part, np.ones((chunk - size,) + part.shape[1:], np.float32)])
        out = run(jnp.asarray(part), ids, reference)
        out = out if reduce is None else reduce(out)
        results.append(np.asarray(out)[:size])
    return np.concatenate(results) if results else np.zeros((0,))


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
