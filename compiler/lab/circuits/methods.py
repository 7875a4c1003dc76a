"""Reference circuit-discovery methods, each giving one score per edge.

* `edge_patching_scores` (exhaustive, ACDC-style): ablate each edge alone and measure how far
  the scored output moves, averaged over the sampled inputs' scored positions (categorical: KL
  divergence of the softmax of the scored logits, plus a column at the empty threshold, from the
  clean one; numerical: absolute change).
  A threshold on the score gives a circuit.
* `acdc_scores` (ACDC's greedy order): walk the ports from the output back, and for each of a
  port's incoming edges ablate it *on top of the edges already removed*; remove it for good when
  the divergence from the clean output grows by less than `threshold`. The score is that growth,
  measured at decision time (so redundant paths look unimportant one at a time).
* `eap_scores` (attribution patching): one forward and one backward pass. Every edge's keep
  weight enters its port's input linearly, so the gradient of a metric with respect to it at the
  unpatched model is `(out_s - ref_s) . d metric / d x_p`, the first-order estimate of ablating
  it. The metric is the log-probability of the clean answer (categorical) or the output value
  (numerical), summed over scored positions and inputs; the score is its absolute value.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from compiler.lab.circuits.components import Network
from compiler.lab.circuits.measure import PatchingSetup
from compiler.lab.circuits.patching import edge_keeps, forward, forward_many
from compiler.model.encoders import EMPTY_THRESHOLD

# An inverse temperature at which the softmax of a compiled one-hot model's logits follows its
# decoded output: with margins of at least 0.5 (logits 0 or 1, the empty threshold 0.5) the
# losing columns keep a probability below exp(-10).
SHARP = 20.0


def with_empty(logits: jax.Array, threshold: float | None = EMPTY_THRESHOLD) -> jax.Array:
    """Logits with one more column held at the network's empty threshold: decoding says "none"
    when every logit is below it, so the softmax sees that choice too (without it a one-column
    output has a constant softmax and no method could see it change). `threshold` None (a
    network decoded by argmax alone): the logits as they are."""
    if threshold is None:
        return logits
    empty = jnp.full(logits.shape[:-1] + (1,), threshold, logits.dtype)
    return jnp.concatenate([logits, empty], axis=-1)


def divergence(s: PatchingSetup, patched: jax.Array, sharpness: float = 1.0) -> jax.Array:
    """`[...]`: mean over scored positions of how far `patched` `[..., B, T, n]` is from clean.

    Categorical outputs compare softmaxes of the logits (with the empty column) multiplied by
    `sharpness`, an inverse temperature. A compiled model's logit scale is arbitrary (scaling
    its unembedding by any positive factor changes no decoded output) and small (one-hot
    logits are 0 or 1 against a threshold of 0.5), so at sharpness 1 the softmax is soft:
    an ablation that leaves the answer but makes it more confident (logits [1, 0] -> [4, 1])
    diverges more than one that flips it to "none" ([1, 0] -> [0, 0]). At a large sharpness
    the softmax approaches the decoded output and the divergence counts flips.
    """
    if s.net.numerical:
        per_position = jnp.abs(patched[..., 0] - s.clean[..., 0])
    else:
        clean = jax.nn.log_softmax(sharpness * with_empty(s.clean, s.net.empty_threshold), axis=-1)
        new = jax.nn.log_softmax(sharpness * with_empty(patched, s.net.empty_threshold), axis=-1)
        per_position = jnp.sum(jnp.exp(clean) * (clean - new), axis=-1)
    weight = s.scored.astype(jnp.float32)
    return jnp.sum(per_position * weight, axis=(-1, -2)) / jnp.maximum(weight.sum(), 1.0)


def edge_patching_scores(s: PatchingSetup, per_position: bool = False, sharpness: float = 1.0) -> np.ndarray:
    """Divergence from the clean output when each edge (or `(edge, position)`) is ablated alone
    (`sharpness`: see `divergence`)."""
    units = len(s.net.edges) * (s.length if per_position else 1)
    ablated = np.eye(units, dtype=bool)
    if per_position:
        ablated = ablated.reshape(units, len(s.net.edges), s.length)
    keeps = edge_keeps(s.net, ablated, s.length)
    return forward_many(s.net, keeps, s.ids, s.reference, reduce=lambda out: divergence(s, out, sharpness))


def acdc_scores(s: PatchingSetup, threshold: float = 1e-3, sharpness: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """`(scores, circuit)` of ACDC's greedy pass (edges whose removal grew the divergence by at
    least `threshold` stay in the circuit; `sharpness`: see `divergence`)."""
    net = s.net
    jitted = _divergence_of_keep(net, sharpness)
    run = lambda keep: jitted(keep, s.ids, s.reference, s.clean, s.scored)
    ports, sources = net.edge_index
    keep = np.ones((len(net.ports), len(net.sources), s.length), np.float32)
    current = float(run(jnp.asarray(keep)))
    scores = np.zeros(len(net.edges))
    circuit = np.ones(len(net.edges), bool)
    for edge in sorted(range(len(net.edges)), key=lambda e: (-ports[e], -sources[e])):
        keep[ports[edge], sources[edge]] = 0.0
        trial = float(run(jnp.asarray(keep)))
        scores[edge] = max(trial - current, 0.0)
        if trial - current < threshold:
            circuit[edge] = False
            current = trial
        else:
            keep[ports[edge], sources[edge]] = 1.0
    return scores, circuit


@functools.lru_cache(maxsize=64)
def _divergence_of_keep(net: Network, sharpness: float) -> Callable:
    """`run(keep, ids, reference, clean, scored) -> divergence`, jitted once per network (the
    ablations of one model share it)."""

    def run(keep: jax.Array, ids: jax.Array, ref: jax.Array, clean: jax.Array, scored: jax.Array) -> jax.Array:
        return divergence(PatchingSetup(net, ids, ref, clean, scored, ""), forward(net, keep, ids, ref), sharpness)

    return jax.jit(run)


def eap_scores(s: PatchingSetup, per_position: bool = False) -> np.ndarray:
    """Absolute attribution-patching estimate per edge (or `(edge, position)`)."""
    net = s.net
    answer = jnp.argmax(with_empty(s.clean, net.empty_threshold), axis=-1)
    weight = s.scored.astype(jnp.float32)

    def metric(keep: jax.Array) -> jax.Array:
        out = forward(net, keep, s.ids, s.reference)
        if net.numerical:
            values = out[..., 0]
        else:
            values = jnp.take_along_axis(jax.nn.log_softmax(with_empty(out, net.empty_threshold), axis=-1), answer[..., None], axis=-1)[..., 0]
        return jnp.sum(values * weight)

    keep = jnp.ones((len(net.ports), len(net.sources), s.length), jnp.float32)
    grad = np.asarray(jax.grad(metric)(keep))  # d metric / d keep = -(effect of ablating), to first order
    ports, sources = net.edge_index
    per_edge = grad[ports, sources]  # [E, T]
    return np.abs(per_edge.ravel() if per_position else per_edge.sum(axis=-1))
