"""Databases of (subject, predicate, object) facts and their 0/1 three-tensors.

A database is a partial map ``D: K x Q -> V``.  Subjects, predicates and objects are single
tokens and the three sets may overlap.  The tensor ``D[k, q, v]`` is 1 exactly at the facts,
with axes ordered as ``subjects``, ``predicates`` and ``objects``.
"""

from __future__ import annotations

import csv
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

Token = Hashable
Fact = tuple[Token, Token, Token]


T = TypeVar("T", bound=Hashable)


def _unique(items: Iterable[T]) -> tuple[T, ...]:
    """Items in first-appearance order without repeats."""
    return tuple(dict.fromkeys(items))


def _fact(fact: tuple[Token, ...]) -> Fact:
    """``fact`` checked to be a triple."""
    if len(fact) != 3:
        raise ValueError(f"a fact is (subject, predicate, object), got {fact!r}")
    return fact


@dataclass(frozen=True)
class Database:
    """A set of facts plus the ordered subject, predicate and object axes of its tensor."""

    facts: tuple[Fact, ...]
    subjects: tuple[Token, ...]
    predicates: tuple[Token, ...]
    objects: tuple[Token, ...]

    def __post_init__(self) -> None:
        seen: dict[tuple[Token, Token], Token] = {}
        for k, q, v in self.facts:
            if k not in self.subjects or q not in self.predicates or v not in self.objects:
                raise ValueError(f"fact {(k, q, v)!r} uses a token missing from the axes")
            if (k, q) in seen and seen[(k, q)] != v:
                raise ValueError(
                    f"subject {k!r} with predicate {q!r} has two objects "
                    f"{seen[(k, q)]!r} and {v!r}; a database is a function of (k, q)"
                )
            seen[(k, q)] = v

    @classmethod
    def from_triples(
        cls,
        triples: Iterable[Sequence[Token]],
        subjects: Sequence[Token] | None = None,
        predicates: Sequence[Token] | None = None,
        objects: Sequence[Token] | None = None,
    ) -> Database:
        """Build from triples; axes default to the tokens seen, in first-appearance order."""
        facts = tuple(_fact(fact) for fact in _unique(tuple(t) for t in triples))
        return cls(
            facts=facts,
            subjects=tuple(subjects) if subjects is not None else _unique(f[0] for f in facts),
            predicates=(
                tuple(predicates) if predicates is not None else _unique(f[1] for f in facts)
            ),
            objects=tuple(objects) if objects is not None else _unique(f[2] for f in facts),
        )

    @classmethod
    def from_csv(cls, path: str | Path, header: bool | None = None) -> Database:
        """Read one ``subject,predicate,object`` triple per row.

        ``header=None`` skips a first row equal to ``subject,predicate,object``.
        """
        with open(path, newline="", encoding="utf-8") as handle:
            rows = [[cell.strip() for cell in row] for row in csv.reader(handle) if row]
        if rows and (header or (header is None and rows[0] == ["subject", "predicate", "object"])):
            rows = rows[1:]
        return cls.from_triples(rows)

    @property
    def tokens(self) -> tuple[Token, ...]:
        """Every token on any axis: subjects, then predicates, then objects (no repeats)."""
        return _unique((*self.subjects, *self.predicates, *self.objects))

    @property
    def size(self) -> int:
        """Number of facts ``|D|``."""
        return len(self.facts)

    def lookup(self, subject: Token, predicate: Token) -> Token | None:
        """The object stored for ``(subject, predicate)``, or None outside the domain."""
        for k, q, v in self.facts:
            if k == subject and q == predicate:
                return v
        return None

    def domain(self) -> tuple[tuple[Token, Token], ...]:
        """The pairs ``(k, q)`` that have a fact, in fact order."""
        return tuple((k, q) for k, q, _ in self.facts)

    def tensor(self) -> np.ndarray:
        """The 0/1 tensor of shape ``(|K|, |Q|, |V|)``."""
        out = np.zeros((len(self.subjects), len(self.predicates), len(self.objects)))
        for k, q, v in self.facts:
            out[self.subjects.index(k), self.predicates.index(q), self.objects.index(v)] = 1.0
        return out

    def values_of_subject(self, subject: Token) -> tuple[Token, ...]:
        """``V_k``: the distinct objects seen with one subject."""
        return _unique(v for k, _, v in self.facts if k == subject)

    def values_of_predicate(self, predicate: Token) -> tuple[Token, ...]:
        """``V_q``: the distinct objects seen with one predicate."""
        return _unique(v for _, q, v in self.facts if q == predicate)


def random_database(n_subjects: int, n_predicates: int, n_objects: int, rho: float,
                    seed: int) -> Database:
    """The reproduction's generator: disjoint integer tokens, each pair a fact w.p. ``rho``.

    Subjects are ``0..nk-1``, predicates follow, then objects; objects are uniform.
    """
    rng = np.random.default_rng(seed)
    subjects = tuple(range(n_subjects))
    predicates = tuple(range(n_subjects, n_subjects + n_predicates))
    objects = tuple(range(n_subjects + n_predicates, n_subjects + n_predicates + n_objects))
    facts = []
    for k in subjects:
        for q in predicates:
            if rng.random() < rho:
                facts.append((k, q, objects[int(rng.integers(n_objects))]))
    return Database(tuple(facts), subjects, predicates, objects)


def example_database() -> Database:
    """The three-table example (people, birth and home countries, currencies): 8 facts."""
    triples = [
        ("Astrid", "born_in", "Singapore"),
        ("Bernard", "born_in", "Singapore"),
        ("Colin", "born_in", "Malaysia"),
        ("Astrid", "lives_in", "Malaysia"),
        ("Bernard", "lives_in", "Singapore"),
        ("Colin", "lives_in", "Malaysia"),
        ("Malaysia", "currency", "Ringgit"),
        ("Singapore", "currency", "Dollar"),
    ]
    return Database.from_triples(
        triples,
        subjects=("Astrid", "Bernard", "Colin", "Malaysia", "Singapore"),
        predicates=("born_in", "lives_in", "currency"),
        objects=("Malaysia", "Singapore", "Ringgit", "Dollar"),
    )
