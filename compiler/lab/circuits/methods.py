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

* `eap_ig_scores` (attribution patching with integrated gradients): the same gradient averaged
  along the straight path from every edge ablated (keep 0) to none (keep 1), by Gauss-Legendre
  quadrature. Its scores of all edges sum (signed) to the metric's whole change between the two
  ends, and it reads the gradient between the ends, where a compiled numerical MLP's hidden units
  are off the kinks that EAP's one point at the clean run sits on (see `eap_ig_scores`). A unit
  whose pre-activation stays on its kink along the whole path (its inputs equal at both ends)
  keeps a gradient decided by rounding, so the scores can still move with the basis (measured
  on pair_balance 5 between variants a and e: 1e-6 of the largest score under mean ablation,
  9e-3 under resample and 0.12 under zero ablation), though far less than EAP's ranking does.

Every method's scores pass one floor (`floored`): a score below `SCORE_FLOOR` times the larger
of the largest score and `score_unit` (the size of a whole change of the scored output) is
float32 rounding, not an effect, and counts as 0. An edge whose effect is exactly 0 (a saturated
unit, a flat softmax, an input the sample never holds) measures 0 or a few 1e-8 depending on how
XLA fuses the computation, on the CPU and on the model's basis. On the reparametrised variant (e)
such rounding, ranked as if it were signal, moved patching's AUROC on detect_abc at length 5
(mean ablation, 12 inputs) from 0.871 in a recorded run to 0.886 in a re-run of the same commit a
day later, and EAP's from 0.875 to 0.993 between optimisation levels. As ties they score the same
under every setting. The unit matters where every effect on the sample is 0: the largest score
is then rounding itself, and a floor relative to it alone keeps the noise.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from compiler.lab.circuits import readout
from compiler.lab.circuits.measure import PatchingSetup, run_sweep, single_edge_sweep
from compiler.lab.circuits.patching import SWEEP_SHARPNESS, divergence_of, edge_keeps, keep_gradient
from compiler.lab.circuits.readout import SHARP, with_empty

__all__ = ["IG_STEPS", "REFERENCE_METHODS", "SCORE_FLOOR", "SHARP", "acdc_scores", "divergence", "eap_ig_scores",
           "eap_scores", "edge_patching_scores", "floored", "score_unit", "with_empty"]

# Relative to max(largest score, score_unit). Measured on detect_abc (variants a and e),
# frac_prevs and count_so_far (e) at length 5 on 12 and 48 inputs: real patching and ACDC
# scores at 5.7e-4 of the largest and above (detect_abc, zero ablation), rounding at 4.4e-5 of it
# and below (count_so_far, a numerical output) and at 1e-8 absolute where nothing on the sample
# matters; real EAP scores at 1e-1 of the largest and above.
SCORE_FLOOR = 1e-4


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
        of the sampled inputs, rounding counted as 0 (`floored`); higher means the edge matters
        more.
    """
    if sharpness in SWEEP_SHARPNESS:
        raw = single_edge_sweep(s, per_position).divergence[:, SWEEP_SHARPNESS.index(sharpness)]
    else:
        units = len(s.net.edges) * (s.length if per_position else 1)
        ablated: np.ndarray = np.eye(units, dtype=bool)
        if per_position:
            ablated = ablated.reshape(units, len(s.net.edges), s.length)
        raw = run_sweep(s, edge_keeps(s.net, ablated, s.length), (sharpness,)).divergence[:, 0]
    return floored(raw, score_unit(s))


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
        tried (0 where it shrank or where it is rounding: `floored`), and `[E]` booleans, the
        edges ACDC kept. Whole edges only (no per-position units).
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
    return floored(scores, score_unit(s)), circuit


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
        weight, the first-order estimate of ablating it; rounding counted as 0 (`floored`).
    """
    # d metric / d keep = -(effect of ablating), to first order
    return floored(np.abs(keep_gradient(s.prepared, per_position).ravel()), score_unit(s, summed=True))


# Quadrature points of `eap_ig_scores`: Gauss-Legendre nodes are irrational, so no point of the
# path lands on a breakpoint that a program's (rational) values put there.
IG_STEPS = 5


def eap_ig_scores(s: PatchingSetup, steps: int = IG_STEPS, per_position: bool = False) -> np.ndarray:
    """Absolute integrated-gradient attribution per edge (or `(edge, position)`): the gradient
    of a metric with respect to each unit's keep weight, averaged over the path on which every
    keep weight goes from 0 to 1 together (`steps` Gauss-Legendre points), one forward and one
    backward pass per point. The metric is EAP's for categorical outputs (the clean answer's
    log-probability); for numerical ones it is minus the absolute deviation from the clean
    output (`readout.numerical_deviation`), since the summed output EAP reads cancels under
    resample ablation.

    Why: EAP reads the gradient at the clean run only. A compiled numerical MLP's hidden units
    sit exactly on their ReLU kinks there, so whether a unit passes gradient is decided by the
    sign of a rounding error, which a change of basis (variant e) flips. Between the ends of the
    path the pre-activations move off the kinks.

    Args:
        s: the patching setup (`measure.setup`); its ablation sets the values the path starts
            from.
        steps: quadrature points (at least 1).
        per_position: score `(edge, destination position)` units (row-major: edge, then
            position) instead of whole edges.
    Returns:
        `[E]` (or `[E * T]` per position) non-negative floats; signed, they would sum to the
        metric at the clean run minus the metric with every unit ablated (up to the quadrature's
        error; for a numerical output, the summed deviation of the fully ablated run); rounding
        counted as 0 (`floored`).
    Raises:
        ValueError: `steps` below 1.
    """
    if steps < 1:
        raise ValueError(f"eap_ig_scores needs at least 1 quadrature step, got steps={steps}")
    nodes, weights = np.polynomial.legendre.leggauss(steps)  # on [-1, 1]; mapped to keep in [0, 1]
    total = np.zeros(())
    for node, weight in zip(nodes, weights):
        gradient = keep_gradient(s.prepared, per_position, keep=float((node + 1) / 2), deviation=True)
        total = total + weight / 2 * np.asarray(gradient, np.float64)
    return floored(np.abs(total.ravel()), score_unit(s, summed=True))


def score_unit(s: PatchingSetup, summed: bool = False) -> float:
    """The size of a whole change of the scored output of `s`: 1 (a nat) for categorical
    outputs, the mean absolute clean output over the scored positions for numerical ones; with
    `summed`, times the number of scored positions (EAP's metric sums where the divergence
    averages)."""
    scored = np.asarray(s.scored, bool)
    count = int(scored.sum())
    if s.net.numerical:
        unit = float(np.abs(np.asarray(s.clean)[..., 0][scored]).mean()) if count else 0.0
    else:
        unit = 1.0
    return unit * count if summed else unit


def floored(scores: np.ndarray, unit: float = 0.0) -> np.ndarray:
    """`scores` with every one below `SCORE_FLOOR` times `max(largest score, unit)` set to 0
    (negative ones included: a divergence below 0 is rounding too); see the module docstring.

    Args:
        scores: one method's scores, any shape.
        unit: the size of a whole change of what the scores measure (`score_unit`).
    Returns:
        float64 scores of the same shape, each 0 or at least the floor.
    """
    scores = np.asarray(scores, np.float64)
    if not scores.size:
        return scores
    floor = SCORE_FLOOR * max(float(scores.max()), unit)
    return np.where(scores < floor, 0.0, scores)


# The reference methods under the names the benchmarks print, each a setup to `[E]` scores.
# "x20": patching's divergence at inverse temperature SHARP, where a compiled model's softmax
# follows its decoded output; the plain names use the raw logits.
REFERENCE_METHODS: dict[str, Callable[[PatchingSetup], np.ndarray]] = {
    "patching": edge_patching_scores,
    f"patching x{SHARP:g}": lambda s: edge_patching_scores(s, sharpness=SHARP),
    "acdc": lambda s: acdc_scores(s)[0],
    "eap": eap_scores,
    "eap-ig": eap_ig_scores,
}
