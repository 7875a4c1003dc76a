"""Compile a fact table into a one-layer attention model, as Craft blocks (docs/facts-bilinear-circuits.md, 'Compiling a fact table into attention weights').

Residual directions: ``tokens:t`` for every database token (one-hot input), ``tokens:BOS``, and
one output logit direction ``fact_out:t`` per token.  For each predicate ``q`` with more than
one object (or every predicate, without ``use_direct_path``) one head:

* ``W_QK[q, k] = +c`` for the subjects ``k`` of ``q``; ``W_QK[q', k] = -c`` for every other
  predicate ``q'`` (those queries attend to themselves, whose value row is zero); the BOS key
  gets ``bos_score`` from every predicate, so the prompt ``(BOS, k, q)`` behaves like ``(k, q)``.
* ``W_OV[k, D(k, q)] = c'``, stored with explicit factors of width ``d_vo = |V_q|``.

Predicates with a single object go through the direct path ``W_E W_U`` instead (an identity-
activation MLP from ``tokens`` to ``fact_out``), as they depend on ``q`` alone.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from constructions.facts.attention_layer import TokenCircuits
from constructions.facts.database import Database
from craft.bases import TOKENS_NAME, BasisDirection, VectorInBasis, VectorSpaceWithBasis, bos_direction, join_vector_spaces
from craft.blocks import MLP, AttentionHead, MultiAttentionHead, SeriesWithResiduals
from craft.maps import BilinearMap, LinearMap

BOS_DIRECTION = bos_direction()
OUTPUT_NAME = "fact_out"


@dataclass(frozen=True, eq=False)
class FactModel:
    """The compiled blocks plus what is needed to run and read them."""

    db: Database
    heads: tuple[AttentionHead, ...]
    head_predicates: tuple[Hashable, ...]
    direct: MLP | None
    token_space: VectorSpaceWithBasis
    output_space: VectorSpaceWithBasis

    @property
    def sublayers(self) -> list:
        """``[attention, MLP]`` as the compiler's assembler expects them."""
        return [MultiAttentionHead(self.heads) if self.heads else None, self.direct]

    @property
    def craft_model(self) -> SeriesWithResiduals:
        return SeriesWithResiduals(tuple(b for b in self.sublayers if b is not None))

    @property
    def residual_space(self) -> VectorSpaceWithBasis:
        return join_vector_spaces(self.token_space, self.output_space,
                                  VectorSpaceWithBasis((BOS_DIRECTION,)))

    def prompt(self, subject: Hashable, predicate: Hashable) -> VectorInBasis:
        """Residual stream of ``(BOS, subject, predicate)`` after the embedding."""
        space = self.residual_space
        stream = np.zeros((3, space.num_dims))
        stream[0, space.index(BOS_DIRECTION)] = 1.0
        stream[1, space.index(BasisDirection(TOKENS_NAME, subject))] = 1.0
        stream[2, space.index(BasisDirection(TOKENS_NAME, predicate))] = 1.0
        return VectorInBasis(space.basis, stream)

    def logits(self, subject: Hashable, predicate: Hashable) -> np.ndarray:
        """Output logits over ``db.tokens`` at the last position (numpy Craft evaluation)."""
        out = self.craft_model.apply(self.prompt(subject, predicate)).project(self.output_space)
        return out.magnitudes[-1]

    def fact_logits(self) -> tuple[np.ndarray, np.ndarray]:
        """Logit rows for every fact and the target column (index into ``db.tokens``)."""
        rows = np.array([self.logits(k, q) for k, q, _ in self.db.facts])
        targets = np.array([self.db.tokens.index(v) for _, _, v in self.db.facts])
        return rows, targets

    def token_circuits(self) -> TokenCircuits:
        """``W_EU``, per-head ``W_QK`` and ``W_OV`` over ``db.tokens`` (BOS dropped)."""
        n = len(self.db.tokens)
        w_qk = np.stack([h.w_qk.on_spaces(self.token_space, self.token_space).matrix
                         for h in self.heads]) if self.heads else np.zeros((0, n, n))
        w_vo = np.stack([h.w_ov.on_spaces(self.token_space, self.output_space).matrix
                         for h in self.heads]) if self.heads else np.zeros((0, n, n))
        w_eu = np.zeros((n, n))
        if self.direct is not None:
            w_eu = (self.direct.first.on_spaces(self.token_space, self.direct.hidden_space).matrix
                    @ self.direct.second.matrix)
            w_eu = LinearMap(self.token_space, self.direct.output_space, w_eu).on_spaces(
                self.token_space, self.output_space).matrix
        return TokenCircuits(w_eu=w_eu, w_qk=w_qk, w_vo=w_vo)


def compile_facts(db: Database, c: float = 10.0, c_out: float = 10.0,
                  bos_score: float = -1000.0, use_direct_path: bool = True) -> FactModel:
    """One head per predicate (direct path for single-object predicates); see module doc."""
    tokens = db.tokens
    token_space = VectorSpaceWithBasis(tuple(BasisDirection(TOKENS_NAME, t) for t in tokens))
    output_space = VectorSpaceWithBasis(tuple(BasisDirection(OUTPUT_NAME, t) for t in tokens))
    key_space = VectorSpaceWithBasis(token_space.basis + (BOS_DIRECTION,))
    index = {t: i for i, t in enumerate(tokens)}
    heads, head_predicates, direct_rows = [], [], []
    for q in db.predicates:
        subjects = [k for k, qq, _ in db.facts if qq == q]
        objects = db.values_of_predicate(q)
        if not subjects:
            continue
        if use_direct_path and len(objects) == 1:
            direct_rows.append((q, objects[0]))
            continue
        heads.append(_predicate_head(db, q, subjects, objects, token_space, key_space,
                                     output_space, index, c, c_out, bos_score))
        head_predicates.append(q)
    direct = _direct_path(direct_rows, token_space, output_space, c_out) if direct_rows else None
    return FactModel(db, tuple(heads), tuple(head_predicates), direct, token_space, output_space)


def _predicate_head(db: Database, q: Hashable, subjects: list, objects: tuple,
                    token_space: VectorSpaceWithBasis, key_space: VectorSpaceWithBasis,
                    output_space: VectorSpaceWithBasis, index: dict, c: float, c_out: float,
                    bos_score: float) -> AttentionHead:
    n = len(index)
    qk = np.zeros((n, n + 1))
    for query in db.predicates:
        sign = 1.0 if query == q else -1.0
        for k in subjects:
            qk[index[query], index[k]] = sign * c
        qk[index[query], n] = bos_score
    w_v = np.zeros((n, len(objects)))
    w_o = np.zeros((len(objects), n))
    for j, v in enumerate(objects):
        w_o[j, index[v]] = c_out
    for k in subjects:
        w_v[index[k], objects.index(db.lookup(k, q))] = 1.0
    return AttentionHead(BilinearMap(token_space, key_space, qk),
                         LinearMap(token_space, output_space, w_v @ w_o),
                         causal=True, w_v=w_v, w_o=w_o)


def _direct_path(rows: list[tuple[Hashable, Hashable]], token_space: VectorSpaceWithBasis,
                 output_space: VectorSpaceWithBasis, c_out: float) -> MLP:
    hidden = VectorSpaceWithBasis(tuple(BasisDirection("fact_direct_hidden", i)
                                        for i in range(len(rows))))
    first = np.zeros((token_space.num_dims, len(rows)))
    second = np.zeros((len(rows), output_space.num_dims))
    for i, (q, v) in enumerate(rows):
        first[token_space.index(BasisDirection(TOKENS_NAME, q)), i] = 1.0
        second[i, output_space.index(BasisDirection(OUTPUT_NAME, v))] = c_out
    return MLP(LinearMap(token_space, hidden, first), LinearMap(hidden, output_space, second),
               "identity")
