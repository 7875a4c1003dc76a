"""Rank bounds for database tensors, with explicit rank-one witnesses.

CP rank is NP-hard in general, so this module only offers upper bounds that come with a
decomposition proving them; :mod:`constructions.facts.cp_als` fits decompositions numerically.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from constructions.facts.database import Database


@dataclass(frozen=True)
class RankOneTerms:
    """A sum of simple tensors ``sum_r a[r] (x) b[r] (x) c[r]`` stored as factor matrices.

    ``a: (R, I)``, ``b: (R, J)``, ``c: (R, K)``; ``R`` is the number of terms.
    """

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray

    @property
    def n_terms(self) -> int:
        return int(self.a.shape[0])

    def full(self) -> np.ndarray:
        """The tensor these terms add up to."""
        return np.einsum("ri,rj,rk->ijk", self.a, self.b, self.c)


@dataclass(frozen=True)
class SliceBound:
    """Proposition 2.1: ``rank(D) <= min(sum_k |V_k|, sum_q |V_q|) <= |D|``."""

    by_subject: int
    by_predicate: int
    n_facts: int

    @property
    def bound(self) -> int:
        return min(self.by_subject, self.by_predicate)


def slice_bound(db: Database) -> SliceBound:
    """The two slice sums of Proposition 2.1 and the fact count."""
    return SliceBound(
        by_subject=sum(len(db.values_of_subject(k)) for k in db.subjects),
        by_predicate=sum(len(db.values_of_predicate(q)) for q in db.predicates),
        n_facts=db.size,
    )


def subject_witness(db: Database) -> RankOneTerms:
    """One simple tensor per (subject k, object v in V_k): ``e_k (x) 1[q: D(k,q)=v] (x) e_v``."""
    rows_a, rows_b, rows_c = [], [], []
    for ki, k in enumerate(db.subjects):
        for v in db.values_of_subject(k):
            a = np.zeros(len(db.subjects))
            a[ki] = 1.0
            b = np.array([1.0 if db.lookup(k, q) == v else 0.0 for q in db.predicates])
            c = np.zeros(len(db.objects))
            c[db.objects.index(v)] = 1.0
            rows_a.append(a)
            rows_b.append(b)
            rows_c.append(c)
    return _stack(rows_a, rows_b, rows_c, db)


def predicate_witness(db: Database) -> RankOneTerms:
    """One simple tensor per (predicate q, object v in V_q): ``1[k: D(k,q)=v] (x) e_q (x) e_v``."""
    rows_a, rows_b, rows_c = [], [], []
    for qi, q in enumerate(db.predicates):
        for v in db.values_of_predicate(q):
            a = np.array([1.0 if db.lookup(k, q) == v else 0.0 for k in db.subjects])
            b = np.zeros(len(db.predicates))
            b[qi] = 1.0
            c = np.zeros(len(db.objects))
            c[db.objects.index(v)] = 1.0
            rows_a.append(a)
            rows_b.append(b)
            rows_c.append(c)
    return _stack(rows_a, rows_b, rows_c, db)


def slice_witness(db: Database) -> RankOneTerms:
    """The shorter of the two witnesses: exactly ``slice_bound(db).bound`` terms."""
    by_subject, by_predicate = subject_witness(db), predicate_witness(db)
    return by_subject if by_subject.n_terms <= by_predicate.n_terms else by_predicate


def _stack(rows_a: list, rows_b: list, rows_c: list, db: Database) -> RankOneTerms:
    shape = (len(db.subjects), len(db.predicates), len(db.objects))
    if not rows_a:
        return RankOneTerms(np.zeros((0, shape[0])), np.zeros((0, shape[1])),
                            np.zeros((0, shape[2])))
    return RankOneTerms(np.array(rows_a), np.array(rows_b), np.array(rows_c))


def agrees_on_domain(candidate: np.ndarray, db: Database) -> bool:
    """Whether ``candidate`` equals ``D`` on every fibre ``(k, q)`` of the domain.

    The effective rank of ``D`` is the least rank of such a candidate; it is what training on
    facts and testing on real ``(k, q)`` pairs requires.  It has no known bound, so the library
    offers only this membership test (pair it with an explicit low-rank candidate).
    """
    d = db.tensor()
    for k, q in db.domain():
        i, j = db.subjects.index(k), db.predicates.index(q)
        if not np.allclose(candidate[i, j], d[i, j]):
            return False
    return True
