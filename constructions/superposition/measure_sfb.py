"""Error measurement for skip feature-bigram heads (docs/superposition.md, 'Skip feature-bigram heads').

Queries and keys are single active features (one-hot in feature space) unless stated; scores
are compared with the number of bigrams present (0 or 1 here). Reports rms error per class and
the balanced acc@0.5 (mean of present and absent accuracies).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from constructions.superposition.metrics import ErrorStats, balanced_accuracy, error_stats
from constructions.superposition.seeding import Seed, as_generator, sample_distinct
from constructions.superposition.sfb import SFBHead


@dataclass(frozen=True)
class SFBReport:
    """Per-class errors of a bigram check and its balanced threshold accuracy."""

    classes: dict[str, ErrorStats]
    balanced_accuracy: float


def _scores(head: SFBHead, q: np.ndarray, k: np.ndarray) -> np.ndarray:
    w = head.features.write.astype(np.float64)
    return head.scores(w[q], w[k])


def _absent_pairs(head: SFBHead, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    m = head.meta.n_features
    present = set(map(tuple, head.bigrams.tolist()))
    q, k = rng.integers(0, m, n), rng.integers(0, m, n)
    bad = np.array([(a, b) in present for a, b in zip(q.tolist(), k.tolist())], dtype=bool)
    while bad.any():
        q[bad], k[bad] = rng.integers(0, m, bad.sum()), rng.integers(0, m, bad.sum())
        bad = np.array([(a, b) in present for a, b in zip(q.tolist(), k.tolist())], dtype=bool)
    return q, k


def measure_bigrams(head: SFBHead, n_samples: int, seed: Seed) -> SFBReport:
    """``present``: random bigrams of ``B``; ``absent``: random pairs not in ``B``."""
    rng = as_generator(seed)
    pick = head.bigrams[rng.integers(0, len(head.bigrams), n_samples)]
    y_present = _scores(head, pick[:, 0], pick[:, 1])
    y_absent = _scores(head, *_absent_pairs(head, rng, n_samples))
    classes = {"present": error_stats(y_present, np.ones(n_samples)),
               "absent": error_stats(y_absent, np.zeros(n_samples))}
    return SFBReport(classes, balanced_accuracy(y_present, y_absent))


def measure_cliques(head: SFBHead, cliques, n_samples: int, seed: Seed) -> SFBReport:
    """Classes ``both`` (q in Q_c, k in K_c), ``query_only`` (q in Q_c, k in no K) and
    ``neither`` (q in no Q, k in no K); absent = query_only and neither together."""
    rng = as_generator(seed)
    m = head.meta.n_features
    in_q = np.zeros(m, dtype=bool)
    in_k = np.zeros(m, dtype=bool)
    for q, k in cliques:
        in_q[list(q)] = True
        in_k[list(k)] = True
    free_q, free_k = np.flatnonzero(~in_q & ~in_k), np.flatnonzero(~in_k & ~in_q)
    c = rng.integers(0, len(cliques), n_samples)
    q_both = np.array([rng.choice(cliques[i][0]) for i in c])
    k_both = np.array([rng.choice(cliques[i][1]) for i in c])
    k_free = rng.choice(free_k, n_samples)
    y = {"both": _scores(head, q_both, k_both),
         "query_only": _scores(head, q_both, k_free),
         "neither": _scores(head, rng.choice(free_q, n_samples), rng.choice(free_k, n_samples))}
    classes = {name: error_stats(v, np.full(n_samples, 1.0 if name == "both" else 0.0))
               for name, v in y.items()}
    absent = np.concatenate([y["query_only"], y["neither"]])
    return SFBReport(classes, balanced_accuracy(y["both"], absent))


def count_error(head: SFBHead, n_samples: int, active: int, seed: Seed) -> float:
    """Max |score - #present bigrams| over random ``active``-hot query/key pairs (exactness)."""
    rng = as_generator(seed)
    m = head.meta.n_features
    qs = sample_distinct(rng, n_samples, active, m)
    ks = sample_distinct(rng, n_samples, active, m)
    # Bias half the samples towards present bigrams so the count is not almost always 0.
    pick = head.bigrams[rng.integers(0, len(head.bigrams), n_samples)]
    half = n_samples // 2
    qs[:half, 0], ks[:half, 0] = pick[:half, 0], pick[:half, 1]
    ok = np.array([len(set(a)) == active and len(set(b)) == active for a, b in zip(qs, ks)])
    qs, ks = qs[ok], ks[ok]
    w = head.features.write.astype(np.float64)
    y = head.scores(w[qs].sum(axis=1), w[ks].sum(axis=1))
    lookup = set(map(tuple, head.bigrams.tolist()))
    counts = np.array([sum((a, b) in lookup for a in qrow for b in krow)
                       for qrow, krow in zip(qs.tolist(), ks.tolist())])
    return float(np.abs(y - counts).max())
