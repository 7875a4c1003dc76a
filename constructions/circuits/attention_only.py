"""QK and OV circuits of attention-only models given as explicit, labelled weight matrices.

Row convention: a head scores query row ``x_s`` against key row ``x_t`` as
``x_s W_Q W_K^T x_t^T`` and writes ``sum_t A[s, t] x_t W_V W_O``.  Any model (trained,
constructed, or compiled) enters through :class:`AttentionOnlyModel`; token-level tables carry
the token and output labels so they can be read without index bookkeeping.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from constructions.circuits.factored import FactoredMatrix
from craft.numerics import softmax


@dataclass(frozen=True)
class HeadWeights:
    """One head: ``w_q, w_k: (d_model, d_qk)``, ``w_v: (d_model, d_vo)``, ``w_o: (d_vo, d_model)``."""

    name: str
    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray
    w_o: np.ndarray

    @property
    def qk(self) -> FactoredMatrix:
        """``W_QK = W_Q W_K^T`` (query rows, key columns), kept factored."""
        return FactoredMatrix(self.w_q, self.w_k.T)

    @property
    def ov(self) -> FactoredMatrix:
        """``W_OV = W_V W_O``, kept factored."""
        return FactoredMatrix(self.w_v, self.w_o)

    def pattern(self, query_rows: np.ndarray, key_rows: np.ndarray, causal: bool) -> np.ndarray:
        """Softmax attention weights ``(n_query, n_key)`` (no score scaling)."""
        scores = (query_rows @ self.w_q) @ (key_rows @ self.w_k).T
        if not causal:
            return softmax(scores)
        n_q, n_k = scores.shape
        return softmax(scores, where=np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q))


@dataclass(frozen=True)
class ForwardTrace:
    """Logits, per-layer attention patterns ``(heads, n, n)`` and residual streams."""

    logits: np.ndarray
    patterns: tuple[np.ndarray, ...]
    residuals: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class AttentionOnlyModel:
    """Embedding ``w_e (vocab, d)``, unembedding ``w_u (d, n_out)``, layers of heads.

    ``w_pos (max_len, d)`` is optional; labels default to indices.
    """

    w_e: np.ndarray
    w_u: np.ndarray
    layers: tuple[tuple[HeadWeights, ...], ...]
    w_pos: np.ndarray | None = None
    causal: bool = True
    token_labels: tuple[Hashable, ...] | None = None
    output_labels: tuple[Hashable, ...] | None = None

    @property
    def tokens(self) -> tuple[Hashable, ...]:
        return self.token_labels if self.token_labels is not None else tuple(range(len(self.w_e)))

    @property
    def outputs(self) -> tuple[Hashable, ...]:
        if self.output_labels is not None:
            return self.output_labels
        return tuple(range(self.w_u.shape[1]))

    def embed(self, tokens: Sequence[int] | np.ndarray) -> np.ndarray:
        """Residual stream after the embedding for token ids."""
        x = self.w_e[np.asarray(tokens)]
        if self.w_pos is not None:
            x = x + self.w_pos[: len(tokens)]
        return x

    def forward(self, tokens: Sequence[int] | np.ndarray) -> ForwardTrace:
        """Run the model on token ids, recording patterns and residuals."""
        x = self.embed(tokens)
        residuals, patterns = [x], []
        for heads in self.layers:
            layer_patterns = np.stack([h.pattern(x, x, self.causal) for h in heads])
            x = x + sum(p @ x @ h.w_v @ h.w_o for p, h in zip(layer_patterns, heads))
            patterns.append(layer_patterns)
            residuals.append(x)
        return ForwardTrace(x @ self.w_u, tuple(patterns), tuple(residuals))


@dataclass(frozen=True)
class LabelledTable:
    """A matrix with labelled rows and columns."""

    row_labels: tuple[Hashable, ...]
    col_labels: tuple[Hashable, ...]
    values: np.ndarray

    def __getitem__(self, key: tuple[Hashable, Hashable]) -> float:
        row, col = key
        return float(self.values[self.row_labels.index(row), self.col_labels.index(col)])

    def row(self, label: Hashable) -> dict[Hashable, float]:
        values = self.values[self.row_labels.index(label)]
        return dict(zip(self.col_labels, values.tolist()))

    def where(self, threshold: float) -> set[tuple[Hashable, Hashable]]:
        """Label pairs whose entry exceeds ``threshold``."""
        rows, cols = np.nonzero(self.values > threshold)
        return {(self.row_labels[r], self.col_labels[c]) for r, c in zip(rows, cols)}

    def sub(self, rows: Sequence[Hashable], cols: Sequence[Hashable]) -> LabelledTable:
        """The table restricted to some row and column labels."""
        r = [self.row_labels.index(x) for x in rows]
        c = [self.col_labels.index(x) for x in cols]
        return LabelledTable(tuple(rows), tuple(cols), self.values[np.ix_(r, c)])


def bilinear_table(matrix: FactoredMatrix | np.ndarray, left_rows: np.ndarray,
                   right_rows: np.ndarray, row_labels: Sequence[Hashable],
                   col_labels: Sequence[Hashable]) -> LabelledTable:
    """``left_rows @ M @ right_rows^T``: a circuit read in any basis (tokens or features)."""
    m = matrix if isinstance(matrix, FactoredMatrix) else FactoredMatrix(matrix, np.eye(matrix.shape[1]))
    values = (left_rows @ m @ right_rows.T).full()
    return LabelledTable(tuple(row_labels), tuple(col_labels), values)


def token_qk_table(model: AttentionOnlyModel, head: HeadWeights) -> LabelledTable:
    """``W_E QK W_E^T``: how much each query token (row) attends to each key token (column)."""
    return bilinear_table(head.qk, model.w_e, model.w_e, model.tokens, model.tokens)


def positional_qk_table(model: AttentionOnlyModel, head: HeadWeights) -> LabelledTable:
    """``W_pos QK W_pos^T`` (requires learned positions)."""
    if model.w_pos is None:
        raise ValueError("model has no positional embedding")
    n = len(model.w_pos)
    return bilinear_table(head.qk, model.w_pos, model.w_pos, range(n), range(n))


def token_ov_table(model: AttentionOnlyModel, head: HeadWeights) -> LabelledTable:
    """``W_E OV W_U``: logit effect (columns) of attending to each source token (rows)."""
    values = (model.w_e @ head.ov @ model.w_u).full()
    return LabelledTable(model.tokens, model.outputs, values)


def direct_path_table(model: AttentionOnlyModel) -> LabelledTable:
    """``W_E W_U``: the bigram term."""
    return LabelledTable(model.tokens, model.outputs, model.w_e @ model.w_u)


def copying_score(table: LabelledTable | np.ndarray | FactoredMatrix) -> float:
    """``sum(eigenvalues) / sum(|eigenvalues|)`` of a square circuit (positive: copies)."""
    if isinstance(table, FactoredMatrix):
        eig = table.eigenvalues()
    else:
        values = table.values if isinstance(table, LabelledTable) else np.asarray(table)
        if values.shape[0] != values.shape[1]:
            raise ValueError("copying score needs a square circuit (vocab in = vocab out)")
        eig = np.linalg.eigvals(values)
    total = float(np.abs(eig).sum())
    return float(np.real(eig.sum()) / total) if total > 0 else 0.0


def head_output_sum(heads: Sequence[HeadWeights]) -> FactoredMatrix:
    """Concatenated ``W_V`` / ``W_O`` of a layer as one factored matrix (= sum of heads' OV)."""
    return FactoredMatrix(np.hstack([h.w_v for h in heads]), np.vstack([h.w_o for h in heads]))


def virtual_weights(w_write: np.ndarray, w_read: np.ndarray) -> np.ndarray:
    """Row-form virtual weights ``W_write @ W_read`` from a writer's input to a later reader."""
    return np.asarray(w_write) @ np.asarray(w_read)
