"""Comparing a compressed model with its compiled original, and the PCA baseline.

The functions work on a :class:`ResidualPair`: the compiled and the decompressed residual
snapshots (``[N, T, D]`` numpy arrays, embedding first, then one per sub-layer) on the same
inputs, and a ``[N, T]`` mask of the positions to use (real tokens: no BOS, no PAD).
:meth:`ResidualPair.layer_outputs` turns snapshots into what each sub-layer writes (the paper's
"output at each layer"); the comparisons then apply to those.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

from compression.learned.frozen import FrozenModel
from compression.learned.losses import position_mask

_EPS = 1e-9


def snapshot_names(count: int) -> list[str]:
    """Names of the residual snapshots: ``embed``, then ``attn_0``, ``mlp_0``, ``attn_1``, ..."""
    names = ["embed"]
    for i in range(count - 1):
        names.append(f"{'attn' if i % 2 == 0 else 'mlp'}_{i // 2}")
    return names


@dataclasses.dataclass(frozen=True)
class ResidualPair:
    """Compiled and decompressed residual snapshots on the same inputs."""

    compiled: tuple[np.ndarray, ...]
    compressed: tuple[np.ndarray, ...]
    mask: np.ndarray
    names: tuple[str, ...] = ()

    def layer_outputs(self) -> ResidualPair:
        """The sub-layer outputs (differences of consecutive snapshots), named per sub-layer."""
        diff = lambda rs: tuple(b - a for a, b in zip(rs[:-1], rs[1:]))
        names = self.names[1:] if self.names else tuple(snapshot_names(len(self.compiled))[1:])
        return ResidualPair(diff(self.compiled), diff(self.compressed), self.mask, names)


def residual_pair(model: FrozenModel, projection: np.ndarray, ids: np.ndarray) -> ResidualPair:
    """Run both models on ``ids`` and return their residual snapshots."""
    ids_j = jnp.asarray(ids)
    compiled = model.forward(model.params, ids_j).residuals
    compressed = model.forward(model.params, ids_j, projection=jnp.asarray(projection)).residuals
    mask = np.asarray(position_mask(ids_j, model.bos_id, model.pad_id))
    return ResidualPair(tuple(np.asarray(r) for r in compiled), tuple(np.asarray(r) for r in compressed), mask,
                        tuple(snapshot_names(len(compiled))))


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    num = np.sum(a * b, axis=-1)
    return num / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), _EPS)


def layer_cosine_similarity(pair: ResidualPair) -> np.ndarray:
    """Per snapshot, the mean over masked positions of cos(compiled, decompressed).

    Positions where the compiled vector is zero are skipped; a layer that writes nothing at
    any position (an empty sub-layer) gets NaN.
    """
    out = []
    for a, b in zip(pair.compiled, pair.compressed):
        use = (pair.mask > 0) & (np.linalg.norm(a, axis=-1) > 1e-6)
        out.append(float(np.mean(_cosine(a[use], b[use]))) if use.any() else float("nan"))
    return np.asarray(out)


def variable_groups(labels: Sequence[str]) -> dict[str, list[int]]:
    """Residual dimensions grouped by variable (``name:value`` and ``name`` both map to ``name``)."""
    groups: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        groups.setdefault(label.split(":", 1)[0], []).append(i)
    return groups


def variable_breakdown(pair: ResidualPair, labels: Sequence[str]) -> list[dict[str, float | str]]:
    """Per variable and snapshot: cosine on the variable's subspace and its squared error.

    ``cosine`` averages over masked positions where either model writes to the subspace;
    ``sq_error`` is the mean squared distance there, ``share`` its fraction of the snapshot's
    total squared distance (where the discrepancy lives).
    """
    rows: list[dict[str, float | str]] = []
    names = pair.names or tuple(snapshot_names(len(pair.compiled)))
    mask = pair.mask > 0
    for name, a, b in zip(names, pair.compiled, pair.compressed):
        a, b = a[mask], b[mask]
        total = float(np.sum(np.square(a - b))) or _EPS
        for var, dims in variable_groups(labels).items():
            sa, sb = a[:, dims], b[:, dims]
            active = (np.linalg.norm(sa, axis=-1) > 1e-6) | (np.linalg.norm(sb, axis=-1) > 1e-6)
            cos = float(np.mean(_cosine(sa[active], sb[active]))) if active.any() else float("nan")
            sq = float(np.sum(np.square(sa - sb)))
            rows.append({"layer": name, "variable": var, "cosine": cos, "sq_error": sq / max(len(a), 1),
                         "share": sq / total})
    return rows


def mean_layer_outputs(pair: ResidualPair) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``[L, D]`` means over masked positions: compiled, decompressed, squared difference."""
    weight = (pair.mask / max(pair.mask.sum(), 1.0))[..., None]
    compiled = np.stack([np.sum(a * weight, axis=(0, 1)) for a in pair.compiled])
    compressed = np.stack([np.sum(b * weight, axis=(0, 1)) for b in pair.compressed])
    sq = np.stack([np.sum(np.square(a - b) * weight, axis=(0, 1)) for a, b in zip(pair.compiled, pair.compressed)])
    return compiled, compressed, sq


@dataclasses.dataclass(frozen=True)
class PCABaseline:
    """Top principal directions of the compiled residual activations, as a projection W."""

    projection: np.ndarray  # [D, d], orthonormal columns
    explained_variance_ratio: np.ndarray  # [d]


def pca_baseline(
    compiled: Sequence[np.ndarray], mask: np.ndarray, d: int, center: bool = True
) -> PCABaseline:
    """PCA with ``d`` components on every snapshot's residual vector at the masked positions."""
    data = np.concatenate([r[mask > 0] for r in compiled], axis=0).astype(np.float64)
    if center:
        data = data - data.mean(axis=0, keepdims=True)
    _, singular, vt = np.linalg.svd(data, full_matrices=False)
    var = np.square(singular)
    ratio = var / max(var.sum(), _EPS)
    w = np.zeros((data.shape[1], d), np.float64)
    k = min(d, vt.shape[0])
    w[:, :k] = vt[:k].T
    return PCABaseline(w.astype(np.float32), np.pad(ratio[:k], (0, d - k)).astype(np.float32))
