"""Figures for compression experiments (matplotlib, Agg backend, PNG files)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.artist import Artist

from compiler.atomic import atomic_write


def _save(fig: plt.Figure, path: str | Path) -> Path:
    try:
        return atomic_write(path, lambda temporary: fig.savefig(temporary, dpi=120, bbox_inches="tight"))
    finally:
        plt.close(fig)


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Running mean over ``window`` steps (shorter at the start)."""
    values = np.asarray(values, np.float64)
    if window <= 1 or len(values) < 2:
        return values
    csum = np.cumsum(np.insert(values, 0, 0.0))
    idx = np.arange(1, len(values) + 1)
    lo = np.maximum(idx - window, 0)
    return (csum[idx] - csum[lo]) / (idx - lo)


def plot_gram(matrix: np.ndarray, labels: Sequence[str], path: str | Path, title: str) -> Path:
    """Heatmap of a D x D matrix (e.g. ``W @ W.T``) with residual labels on both axes."""
    n = len(labels)
    fig, ax = plt.subplots(figsize=(0.42 * n + 2.5, 0.42 * n + 1.5))
    limit = max(float(np.max(np.abs(matrix))), 1e-6)
    image = ax.imshow(matrix, cmap="RdBu_r", vmin=-limit, vmax=limit)
    ax.set_xticks(range(n), labels, rotation=90, fontsize=8)
    ax.set_yticks(range(n), labels, fontsize=8)
    ax.set_title(title)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return _save(fig, path)


def plot_loss_curves(curves: Mapping[int, np.ndarray], path: str | Path, title: str, window: int = 200) -> Path:
    """Smoothed per-step loss for each width d, log scale (paper Figure 7a)."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    cmap = plt.get_cmap("viridis")
    keys = sorted(curves)
    for i, d in enumerate(keys):
        values = smooth(curves[d], window)
        ax.plot(np.arange(1, len(values) + 1), np.maximum(values, 1e-12), color=cmap(i / max(len(keys) - 1, 1)),
                label=f"d={d}", lw=1.2)
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("loss")
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=2)
    return _save(fig, path)


def plot_final_loss(
    widths: Sequence[int], losses: Mapping[str, Sequence[float]], path: str | Path, title: str,
    residual_dim: int | None = None,
) -> Path:
    """Final loss against d for one or more loss series (paper Figure 7b)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, values in losses.items():
        ax.plot(widths, np.maximum(np.asarray(values, np.float64), 1e-12), marker="o", label=name)
    if residual_dim is not None:
        ax.axvline(residual_dim, color="grey", ls="--", lw=1, label=f"compiled D={residual_dim}")
    ax.set_yscale("log")
    ax.set_xlabel("compressed width d")
    ax.set_ylabel("final loss")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_layer_outputs(
    compiled: np.ndarray, compressed: np.ndarray, sq_diff: np.ndarray, labels: Sequence[str],
    layer_names: Sequence[str], path: str | Path,
) -> Path:
    """Three ``[layers, D]`` heatmaps: mean compiled, mean compressed, mean squared difference (Fig 8 left)."""
    n = len(labels)
    fig, axes = plt.subplots(1, 3, figsize=(3 * (0.3 * n + 1.5), 0.45 * len(layer_names) + 2.8), sharey=True)
    limit = max(float(np.max(np.abs(compiled))), float(np.max(np.abs(compressed))), 1e-6)
    styles = [dict(cmap="RdBu_r", vmin=-limit, vmax=limit)] * 2 + [dict(cmap="viridis", vmin=0.0)]
    for ax, data, title, style in zip(axes, (compiled, compressed, sq_diff),
                                      ("compiled", "compressed", "squared difference"), styles):
        image = ax.imshow(data, aspect="auto", **style)
        ax.set_xticks(range(n), labels, rotation=90, fontsize=7)
        ax.set_yticks(range(len(layer_names)), layer_names, fontsize=8)
        ax.set_title(title)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return _save(fig, path)


def plot_training_metrics(
    steps: Sequence[int], accuracy: Sequence[float], cosine: np.ndarray, layer_names: Sequence[str],
    path: str | Path,
) -> Path:
    """Accuracy and per-layer cosine similarity over training (paper Figure 8 right)."""
    fig, (ax_acc, ax_cos) = plt.subplots(1, 2, figsize=(10, 4))
    ax_acc.plot(steps, accuracy, color="black")
    ax_acc.set_ylim(-0.02, 1.02)
    ax_acc.set_xlabel("training step")
    ax_acc.set_ylabel("accuracy vs RASP")
    cosine = np.asarray(cosine)
    for i, name in enumerate(layer_names):
        ax_cos.plot(steps, cosine[:, i], label=name)
    ax_cos.set_ylim(min(0.0, float(np.nanmin(cosine)) - 0.05) if cosine.size else 0.0, 1.02)
    ax_cos.set_xlabel("training step")
    ax_cos.set_ylabel("mean cosine similarity")
    ax_cos.legend(fontsize=7)
    return _save(fig, path)


def plot_accuracy_vs_width(
    panels: Mapping[str, Mapping[str, Sequence[tuple[int, float]]]], path: str | Path, title: str
) -> Path:
    """One panel per program: sequence accuracy against d, one line per method.

    ``panels[program][method]`` lists ``(d, accuracy)`` points; a dashed line marks accuracy 1.
    """
    names = list(panels)
    cols = min(4, max(1, len(names)))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.8 * rows), squeeze=False)
    for ax in axes.ravel()[len(names):]:
        ax.axis("off")
    methods = list(dict.fromkeys(m for panel in panels.values() for m in panel))  # one colour each, everywhere
    for ax, name in zip(axes.ravel(), names):
        for method, points in panels[name].items():
            if points:
                ds, accs = zip(*sorted(points))
                ax.plot(ds, accs, marker="o", markersize=3, label=method, color=f"C{methods.index(method) % 10}")
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=0.8)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("d", fontsize=8)
        ax.set_ylabel("sequence accuracy", fontsize=8)
        ax.set_ylim(-0.05, 1.05)
        ax.tick_params(labelsize=7)
    handles: dict[str, Artist] = {}
    for ax in axes.ravel():
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    axes.ravel()[0].legend(handles.values(), handles.keys(), fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)
