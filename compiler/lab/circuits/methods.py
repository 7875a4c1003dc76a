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
  A score below `EAP_FLOOR` times the largest is float32 rounding, not attribution, and counts
  as 0: an edge whose first-order effect is exactly 0 (a saturated unit, a flat softmax) gets a
  gradient of 0 or of a few 1e-7 depending on how XLA fuses the backward pass, and ranked as
  such it moved EAP's AUROC on one model from 0.875 to 0.993 between optimisation levels; as
  ties they score the same under every level.
"""

from __future__ import annotations

import numpy as np

from compiler.lab.circuits import readout
from compiler.lab.circuits.measure import PatchingSetup, run_sweep, single_edge_sweep
from compiler.lab.circuits.patching import SWEEP_SHARPNESS, divergence_of, edge_keeps, keep_gradient
from compiler.lab.circuits.readout import SHARP, with_empty

__all__ = ["EAP_FLOOR", "SHARP", "acdc_scores", "divergence", "eap_scores", "edge_patching_scores", "with_empty"]

# Relative to the largest score: below it an attribution is float32 rounding (measured: real
# scores of compiled models at 1e-1 of the largest and above, rounding at 1e-6 and below).
EAP_FLOOR = 1e-4


def divergence(s: PatchingSetup, patched, sharpness: float = 1.0):
    """`[...]`: `readout.divergence` of `patched` `[..., B, T, n]` from the clean output of `s`."""
    return readout.divergence(s.clean, patched, s.scored, s.net.numerical, s.net.empty_threshold, sharpness)


def edge_patching_scores(s: PatchingSetup, per_position: bool = False, sharpness: float = 1.0) -> np.ndarray:
    """Divergence from the clean output when each edge (or `(edge, position)`) is ablated alone
    (`sharpness`: see `readout.divergence`). Read from the setup's single-edge sweep, which the
    circuit's measurement shares, when `sharpness` is one of `patching.SWEEP_SHARPNESS`.

    Args:
        s: the patching setup (`measure.setup`): network, inputs and ablation.
        per_position: score `(edge, destination position)` units (row-major: edge, then
            position) instead of whole edges.
        sharpness: the inverse temperature of the categorical divergence; 1.0 compares the
            plain softmaxes, `SHARP` approaches counting changed decoded outputs.
    Returns:
        `[E]` (or `[E * T]` per position) divergences, each the mean over the scored positions
        of the sampled inputs; higher means the edge matters more.
    """
    if sharpness in SWEEP_SHARPNESS:
        return single_edge_sweep(s, per_position).divergence[:, SWEEP_SHARPNESS.index(sharpness)]
    units = len(s.net.edges) * (s.length if per_position else 1)
    ablated: np.ndarray = np.eye(units, dtype=bool)
    if per_position:
        ablated = ablated.reshape(units, len(s.net.edges), s.length)
    return run_sweep(s, edge_keeps(s.net, ablated, s.length), (sharpness,)).divergence[:, 0]


def acdc_scores(s: PatchingSetup, threshold: float = 1e-3, sharpness: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """`(scores, circuit)` of ACDC's greedy pass (edges whose removal grew the divergence by at
    least `threshold` stay in the circuit; `sharpness`: see `readout.divergence`).

    Args:
        s: the patching setup (`measure.setup`).
        threshold: an edge whose removal, on top of the edges already removed, grows the
            divergence from the clean output by less than this is removed for good.
        sharpness: the inverse temperature of the categorical divergence (as in
            `edge_patching_scores`).
    Returns:
        `(scores, circuit)`: `[E]` floats, each edge's growth of the divergence when it was
        tried (0 where it shrank), and `[E]` booleans, the edges ACDC kept. Whole edges only
        (no per-position units).
    """
    net = s.net
    run = lambda keep: divergence_of(s.prepared, keep, sharpness)
    ports, sources = net.edge_index
    keep = np.ones((len(net.ports), len(net.sources), s.length), np.float32)
    current = run(keep)
    scores = np.zeros(len(net.edges))
    circuit = np.ones(len(net.edges), bool)
    for edge in sorted(range(len(net.edges)), key=lambda e: (-ports[e], -sources[e])):
        keep[ports[edge], sources[edge]] = 0.0
        trial = run(keep)
        scores[edge] = max(trial - current, 0.0)
        if trial - current < threshold:
            circuit[edge] = False
            current = trial
        else:
            keep[ports[edge], sources[edge]] = 1.0
    return scores, circuit


def eap_scores(s: PatchingSetup, per_position: bool = False) -> np.ndarray:
    """Absolute attribution-patching estimate per edge (or `(edge, position)`): one forward and
    one backward pass (`patching.keep_gradient`).

    Args:
        s: the patching setup (`measure.setup`); its ablation sets the reference values the
            estimate patches towards.
        per_position: score `(edge, destination position)` units (row-major: edge, then
            position) instead of whole edges.
    Returns:
        `[E]` (or `[E * T]` per position) non-negative floats: the absolute gradient of the
        clean answer's log-probability (numerical: the output) with respect to each unit's keep
        weight, the first-order estimate of ablating it; 0 where it is below `EAP_FLOOR` times
        the largest (float32 rounding: module docstring).
    """
    # d metric / d keep = -(effect of ablating), to first order
    return _floored(np.abs(keep_gradient(s.prepared, per_position).ravel()))


def _floored(scores: np.ndarray) -> np.ndarray:
    """`scores` (non-negative) with every one below `EAP_FLOOR` times the largest set to 0."""
    scores = np.asarray(scores, np.float64)
    if not scores.size:
        return scores
    return np.where(scores < EAP_FLOOR * scores.max(), 0.0, scores)
