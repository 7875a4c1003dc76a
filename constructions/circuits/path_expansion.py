"""Path expansion of attention-only models with frozen attention patterns.

Once the patterns ``A`` of a forward pass are fixed, the model is linear in the embedding, and
the logits split exactly into one term per *path*: a (possibly empty) chain of heads taken from
strictly increasing layers.  The empty path is the direct path ``X W_U``; a single head gives
``A^h X W_OV^h W_U``; two heads ``h1 < h2`` give the virtual head
``A^{h2} A^{h1} X W_OV^{h1} W_OV^{h2} W_U`` (V-composition).  Scores of later heads split the
same way into query-side / key-side source pairs (Q- and K-composition).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from constructions.circuits.attention_only import AttentionOnlyModel, ForwardTrace, HeadWeights, LabelledTable
from constructions.circuits.factored import FactoredMatrix

Path = tuple[tuple[int, int], ...]  # ((layer, head), ...), layers strictly increasing


def path_name(model: AttentionOnlyModel, path: Path) -> str:
    """``"direct"``, a head name, or head names joined by ``">"`` (earliest first)."""
    if not path:
        return "direct"
    return ">".join(model.layers[layer][h].name for layer, h in path)


def all_paths(model: AttentionOnlyModel, up_to_layer: int | None = None) -> tuple[Path, ...]:
    """Every chain of heads from strictly increasing layers (empty path first)."""
    n_layers = len(model.layers) if up_to_layer is None else up_to_layer
    paths: list[Path] = [()]
    for layers in itertools.chain.from_iterable(itertools.combinations(range(n_layers), k)
                                                for k in range(1, n_layers + 1)):
        for heads in itertools.product(*(range(len(model.layers[layer])) for layer in layers)):
            paths.append(tuple(zip(layers, heads)))
    return tuple(paths)


def path_residual(model: AttentionOnlyModel, trace: ForwardTrace, x0: np.ndarray,
                  path: Path) -> np.ndarray:
    """Contribution of one path to the residual stream: ``(A_last..A_first) X0 (OV_first..OV_last)``."""
    out = x0
    for layer, head in path:
        h = model.layers[layer][head]
        out = trace.patterns[layer][head] @ out @ h.w_v @ h.w_o
    return out


@dataclass(frozen=True)
class PathExpansion:
    """Logit contribution ``(n, n_out)`` of every path, keyed by :func:`path_name`."""

    terms: dict[str, np.ndarray]
    trace: ForwardTrace

    def total(self) -> np.ndarray:
        first, *rest = self.terms.values()  # there is always the direct path's term
        return sum(rest, first)

    def max_error(self) -> float:
        """Largest gap between the sum of terms and the forward pass's logits."""
        return float(np.abs(self.total() - self.trace.logits).max())


def expand_paths(model: AttentionOnlyModel, tokens: list[int] | np.ndarray) -> PathExpansion:
    """Run the model and split its logits into path terms (patterns frozen from this run)."""
    trace = model.forward(tokens)
    x0 = model.embed(tokens)
    terms = {path_name(model, p): path_residual(model, trace, x0, p) @ model.w_u
             for p in all_paths(model)}
    return PathExpansion(terms, trace)


def virtual_ov_table(model: AttentionOnlyModel, path: Path) -> LabelledTable:
    """Token-level OV circuit of a path: ``W_E OV^{h1} OV^{h2} ... W_U``."""
    m = FactoredMatrix(model.w_e, np.eye(model.w_e.shape[1]))
    for layer, head in path:
        m = m @ model.layers[layer][head].ov
    return LabelledTable(model.tokens, model.outputs, (m @ model.w_u).full())


def score_terms(model: AttentionOnlyModel, tokens: list[int] | np.ndarray, layer: int,
                head: int) -> dict[tuple[str, str], np.ndarray]:
    """Pre-softmax scores of one head split by (query-side path, key-side path).

    Paths run through earlier layers only; the terms sum to the head's actual scores.
    ``("direct", "L0H1")`` is K-composition with head L0H1, ``("L0H1", "direct")`` Q-composition.
    """
    trace = model.forward(tokens)
    x0 = model.embed(tokens)
    target = model.layers[layer][head]
    parts = {path_name(model, p): path_residual(model, trace, x0, p)
             for p in all_paths(model, up_to_layer=layer)}
    return {(qn, kn): (q @ target.w_q) @ (k @ target.w_k).T
            for qn, q in parts.items() for kn, k in parts.items()}


def head_scores(model: AttentionOnlyModel, tokens: list[int] | np.ndarray, layer: int,
                head: int) -> np.ndarray:
    """The head's actual pre-softmax scores in a forward pass (for checking decompositions)."""
    x = model.forward(tokens).residuals[layer]
    h = model.layers[layer][head]
    return (x @ h.w_q) @ (x @ h.w_k).T


@dataclass(frozen=True)
class CompositionScores:
    """Relative Frobenius norms of the composed circuits (0 = no composition)."""

    q: float
    k: float
    v: float


def composition_scores(writer: HeadWeights, reader: HeadWeights) -> CompositionScores:
    """``||W_OV^{w} X||_F / (||W_OV^{w}||_F ||X||_F)`` for X = QK, QK^T, OV of the reader."""

    def strength(x: FactoredMatrix) -> float:
        denom = writer.ov.norm() * x.norm()
        return (writer.ov @ x).norm() / denom if denom > 0 else 0.0

    return CompositionScores(strength(reader.qk), strength(reader.qk.T), strength(reader.ov))
