"""The three-tensor ``L = E + sum_h A^h V^h`` of a one-layer attention model on (k, q) prompts.

Axes of ``L``: subject token (position 0), predicate token (position 1), output token.  Index
arrays give which token ids the subject/predicate/output axes range over, so ``L`` can be laid
directly beside a :class:`~constructions.facts.database.Database` tensor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from constructions.facts.attention_layer import AttentionLayer, TokenCircuits
from constructions.facts.db_rank import RankOneTerms
from craft.numerics import softmax


@dataclass(frozen=True)
class LayerTensors:
    """``attention (H, K, Q, T)``, ``value (H, T, Q, V)``, ``direct (K, Q, V)`` and their sum."""

    attention: np.ndarray
    value: np.ndarray
    direct: np.ndarray

    @property
    def total(self) -> np.ndarray:
        """``L[k, q, v]``: the logits after the prompt ``(k, q)``."""
        heads = np.einsum("hkqt,htqv->kqv", self.attention, self.value)
        return self.direct + heads


def attention_tensor(circuits: TokenCircuits, subjects: np.ndarray,
                     predicates: np.ndarray) -> np.ndarray:
    """``A^h[k, q, t]``: weight the last position of ``(k, q)`` puts on token ``t``.

    A repeated token (``k == q``) gets the sum of its two position weights.
    """
    subjects, predicates = np.asarray(subjects), np.asarray(predicates)
    n_tok = circuits.w_eu.shape[0]
    out = np.zeros((circuits.n_heads, len(subjects), len(predicates), n_tok))
    for h in range(circuits.n_heads):
        for qi, q in enumerate(predicates):
            both = np.stack([circuits.w_qk[h][q, subjects],
                             np.full(len(subjects), circuits.w_qk[h][q, q])], axis=1)
            both = softmax(both, axis=1)
            np.add.at(out[h, :, qi], (np.arange(len(subjects)), subjects), both[:, 0])
            out[h, :, qi, q] += both[:, 1]
    return out


def layer_tensors(circuits: TokenCircuits, subjects: np.ndarray, predicates: np.ndarray,
                  outputs: np.ndarray | None = None) -> LayerTensors:
    """All pieces of ``L`` over the given subject / predicate / output token ids."""
    subjects, predicates = np.asarray(subjects), np.asarray(predicates)
    n_tok = circuits.w_eu.shape[0]
    outputs = np.arange(n_tok) if outputs is None else np.asarray(outputs)
    att = attention_tensor(circuits, subjects, predicates)
    vo = circuits.w_vo[:, :, outputs]
    value = np.repeat(vo[:, :, None, :], len(predicates), axis=2)
    direct = np.repeat(circuits.w_eu[np.ix_(predicates, outputs)][None], len(subjects), axis=0)
    return LayerTensors(attention=att, value=value, direct=direct)


def layer_rank_bound(d_model: int, n_heads: int, d_vo: int, n_predicates: int) -> int:
    """Proposition 3.5: ``rank(L) <= d_model + n_heads * d_vo * |Q|``."""
    return d_model + n_heads * d_vo * n_predicates


def layer_capacity(d_model: int, n_heads: int, d_vo: int) -> int:
    """Inequality (9)'s heuristic lower estimate ``d_model + n_heads * d_vo`` of ``rank(L)``."""
    return d_model + n_heads * d_vo


def parameter_count(d_model: int, n_heads: int, d_qk: int, d_vo: int) -> int:
    """Attention parameters ``2 * n_heads * d_model * (d_vo + d_qk)``."""
    return 2 * n_heads * d_model * (d_vo + d_qk)


def condition_10(db_bound: int, d_model: int, n_heads: int, d_vo: int) -> bool:
    """Condition (10): the database's slice bound fits under the layer capacity."""
    return db_bound <= layer_capacity(d_model, n_heads, d_vo)


def layer_witness(layer: AttentionLayer, subjects: np.ndarray, predicates: np.ndarray,
                  outputs: np.ndarray | None = None) -> RankOneTerms:
    """The explicit decomposition behind Proposition 3.5.

    ``d_model`` terms ``1_K (x) W_E[Q, r] (x) W_U[r, V]`` and, per head and predicate,
    ``d_vo`` terms ``(A^h[:, q, :] W_E W_V^h)[:, r] (x) e_q (x) (W_O^h W_U)[r, V]``.
    """
    subjects, predicates = np.asarray(subjects), np.asarray(predicates)
    outputs = np.arange(layer.vocab_size) if outputs is None else np.asarray(outputs)
    att = attention_tensor(TokenCircuits.from_layer(layer), subjects, predicates)
    a_rows, b_rows, c_rows = [], [], []
    for r in range(layer.d_model):
        a_rows.append(np.ones(len(subjects)))
        b_rows.append(layer.w_e[predicates, r])
        c_rows.append(layer.w_u[r, outputs])
    for h in range(layer.n_heads):
        out_side = (layer.w_o[h] @ layer.w_u)[:, outputs]
        for qi in range(len(predicates)):
            in_side = att[h, :, qi, :] @ layer.w_e @ layer.w_v[h]
            for r in range(layer.d_vo):
                a_rows.append(in_side[:, r])
                indicator = np.zeros(len(predicates))
                indicator[qi] = 1.0
                b_rows.append(indicator)
                c_rows.append(out_side[r])
    return RankOneTerms(np.array(a_rows), np.array(b_rows), np.array(c_rows))
