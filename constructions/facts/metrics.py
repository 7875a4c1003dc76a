"""Fact-recall accuracy (argmax and ``softmax >= tau``) and the argmax/softmax rank witnesses."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from constructions.facts.database import Database
from craft.numerics import softmax

TAUS = (0.5, 0.75, 0.95, 0.99)


def argmax_accuracy(logits: np.ndarray, targets: np.ndarray) -> float:
    """Fraction of rows whose target is the unique largest logit (ties count as wrong)."""
    logits, targets = np.asarray(logits), np.asarray(targets)
    rows = np.arange(len(targets))
    target_logit = logits[rows, targets]
    others = logits.copy().astype(np.float64)
    others[rows, targets] = -np.inf
    return float(np.mean(target_logit > others.max(axis=1)))


def tau_accuracy(logits: np.ndarray, targets: np.ndarray, tau: float) -> float:
    """``acc_{>=tau}``: fraction of rows whose target gets softmax probability ``>= tau``."""
    if not 0.5 <= tau <= 1.0:
        raise ValueError(f"tau must lie in [0.5, 1], got {tau}")
    probs = softmax(np.asarray(logits, dtype=np.float64))
    return float(np.mean(probs[np.arange(len(targets)), np.asarray(targets)] >= tau))


@dataclass(frozen=True)
class RecallScores:
    """Argmax accuracy and ``acc_{>=tau}`` for each tau in :data:`TAUS`."""

    argmax: float
    tau: tuple[tuple[float, float], ...]

    def at(self, tau: float) -> float:
        return dict(self.tau)[tau]

    def is_ordered(self) -> bool:
        """``argmax >= tau(0.5) >= tau(0.75) >= ...`` (always true; a sanity property)."""
        chain = [self.argmax] + [acc for _, acc in self.tau]
        return all(a >= b for a, b in zip(chain, chain[1:]))


def recall_scores(logits: np.ndarray, targets: np.ndarray,
                  taus: tuple[float, ...] = TAUS) -> RecallScores:
    """All accuracies at once for per-fact logit rows."""
    return RecallScores(argmax_accuracy(logits, targets),
                        tuple((t, tau_accuracy(logits, targets, t)) for t in taus))


def fact_rows(layer_logits: np.ndarray, db: Database) -> tuple[np.ndarray, np.ndarray]:
    """Per-fact logit rows and target columns from ``L`` laid out over the database's axes."""
    rows, targets = [], []
    for k, q, v in db.facts:
        rows.append(layer_logits[db.subjects.index(k), db.predicates.index(q)])
        targets.append(db.objects.index(v))
    return np.array(rows), np.array(targets)


def circle_gram(n: int, r: int = 2) -> np.ndarray:
    """Gram matrix of ``n`` distinct unit vectors in ``R^r`` (rank ``r``, Prop. 3.6 witness).

    The points lie on a circle in the first two coordinates.
    """
    if r < 2 or n < r:
        raise ValueError("need 2 <= r <= n")
    angles = 2 * np.pi * np.arange(n) / n
    points = np.zeros((n, r))
    points[:, 0], points[:, 1] = np.cos(angles), np.sin(angles)
    return points @ points.T


def row_argmax_matrix(m: np.ndarray) -> np.ndarray:
    """0/1 matrix marking each row's largest entry."""
    out = np.zeros_like(m, dtype=np.float64)
    out[np.arange(m.shape[0]), np.argmax(m, axis=1)] = 1.0
    return out
