"""Score any method's edge scores against a ground-truth circuit.

A method gives one number per edge (higher: more likely in the circuit; only the order matters,
so signs should already be folded in, e.g. absolute attributions). Against the boolean truth:

* **ROC AUC**: the probability that a random circuit edge scores above a random non-circuit
  edge, ties counting one half (the Mann-Whitney statistic); 1.0 is a perfect ranking, about
  0.5 a random one.
* **average precision**: the mean, over circuit edges, of the precision among the edges scoring
  at least as high (ties resolved pessimistically, as a threshold would).
* **best F1**: the best F1 of "score >= threshold" over every threshold.

Undefined cases (no circuit edge, or every edge in the circuit) give NaN for ROC AUC.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy.stats import rankdata

from compiler.errors import LabError


@dataclasses.dataclass(frozen=True)
class Score:
    """How well one method's scores recover one ground-truth circuit."""

    roc_auc: float
    average_precision: float
    best_f1: float
    best_threshold: float
    positives: int
    edges: int


def _check(scores: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scores = np.asarray(scores, np.float64).ravel()
    truth = np.asarray(truth, bool).ravel()
    if scores.shape != truth.shape:
        raise LabError(f"{scores.size} scores for {truth.size} ground-truth edges: give one score per edge, in the record's edge order")
    if not np.all(np.isfinite(scores)):
        raise LabError("scores contain NaN or infinity; give every edge a finite score")
    return scores, truth


def roc_auc(scores: np.ndarray, truth: np.ndarray) -> float:
    scores, truth = _check(scores, truth)
    positives, negatives = int(truth.sum()), int((~truth).sum())
    if not positives or not negatives:
        return math.nan
    ranks = rankdata(scores)  # average ranks: ties count one half
    return float((ranks[truth].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def _threshold_curve(scores: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per distinct score (descending): true positives and predicted positives at `>= score`."""
    order = np.argsort(-scores, kind="stable")
    sorted_scores, sorted_truth = scores[order], truth[order]
    last_of_tie = np.r_[np.nonzero(np.diff(sorted_scores))[0], len(scores) - 1]
    true_pos = np.cumsum(sorted_truth)[last_of_tie]
    return sorted_scores[last_of_tie], true_pos, last_of_tie + 1


def average_precision(scores: np.ndarray, truth: np.ndarray) -> float:
    scores, truth = _check(scores, truth)
    positives = int(truth.sum())
    if not positives:
        return math.nan
    _, true_pos, predicted = _threshold_curve(scores, truth)
    recall_steps = np.diff(np.r_[0, true_pos]) / positives
    return float(np.sum(recall_steps * true_pos / predicted))


def best_f1(scores: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """`(best F1, the threshold reaching it)`."""
    scores, truth = _check(scores, truth)
    positives = int(truth.sum())
    if not positives:
        return math.nan, math.nan
    thresholds, true_pos, predicted = _threshold_curve(scores, truth)
    f1 = 2 * true_pos / (predicted + positives)
    best = int(np.argmax(f1))
    return float(f1[best]), float(thresholds[best])


def score(scores: np.ndarray, truth: np.ndarray) -> Score:
    """All three numbers for one method against one circuit.

    Args:
        scores: one finite number per edge, in the record's edge order.
        truth: the ground-truth circuit, one boolean per edge.
    Returns:
        The `Score`: ROC AUC, average precision, best F1 and its threshold, the number of
        circuit edges and of edges. ROC AUC is NaN when every edge or no edge is in the
        circuit; average precision, best F1 and its threshold are NaN when none is.
    Raises:
        LabError: lengths differ or a score is not finite.
    """
    f1, threshold = best_f1(scores, truth)
    truth = np.asarray(truth, bool)
    return Score(roc_auc(scores, truth), average_precision(scores, truth), f1, threshold, int(truth.sum()), truth.size)
