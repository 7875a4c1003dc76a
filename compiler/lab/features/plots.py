"""Pictures of the benchmark: SAE recovery against the compression width d and against L0, and
the SAEs' training-loss curves."""

from __future__ import annotations

import pathlib
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from compiler.atomic import atomic_write


def recovery_plot(path: str | pathlib.Path, by_width: Sequence[dict], by_l0: Sequence[dict], title: str) -> pathlib.Path:
    """Two panels: metrics against d (``by_width`` rows with ``d``, ``mcc``, ``f1``, ``spliced``, and
    the compressed model's own accuracy ``model_accuracy`` where present) and against the SAE's L0
    (``by_l0`` rows with ``k`` and the same SAE metrics). Written atomically.

    Args:
        path: the image file to write; its suffix picks the format (e.g. ``.png``).
        by_width: one dict per compressed width, with ``d`` and any of ``mcc``, ``f1``,
            ``spliced``, ``causal`` and ``model_accuracy``; a metric is drawn when the first row
            (by ``d``) has it.
        by_l0: one dict per SAE L0, with ``k`` and any of ``mcc``, ``f1``, ``spliced``,
            ``causal``, drawn likewise.
        title: the figure's title.

    Returns:
        The path written (``compiler.atomic.atomic_write``'s).

    Raises:
        ModelFileError: ``path`` cannot be written.
    """
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, rows, key, label in ((axes[0], by_width, "d", "compressed width d (less d: more superposition)"),
                                 (axes[1], by_l0, "k", "SAE L0 (k of a TopK SAE)")):
        rows = sorted(rows, key=lambda r: r[key])
        xs = [r[key] for r in rows]
        for metric, style in (("mcc", "o-"), ("f1", "s--"), ("spliced", "^:"), ("causal", "d-.")):
            if rows and metric in rows[0]:
                ax.plot(xs, [r[metric] for r in rows], style, label=metric)
        if key == "d" and rows and "model_accuracy" in rows[0]:
            ax.plot(xs, [r["model_accuracy"] for r in rows], "x-", color="grey", label="model itself (no SAE)")
        ax.set_xlabel(label)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("score")
    axes[0].legend(loc="center left", bbox_to_anchor=(0.0, 0.68), fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    out = atomic_write(path, lambda temporary: fig.savefig(temporary, dpi=110))
    plt.close(fig)
    return out


def loss_plot(path: str | pathlib.Path, curves: dict[str, Sequence[Sequence[float]]], title: str,
              ylabel: str = "training loss") -> pathlib.Path:
    """Training-loss curves (``label -> [(step, loss), ...]``) on a log loss axis, one line each,
    so a reader can see whether each run flattened out. Written atomically.

    Args:
        path: the image file to write; its suffix picks the format (e.g. ``.png``).
        curves: per run label, its ``(step, loss)`` points (e.g. ``train_sae``'s ``history``).
        title: the figure's title.
        ylabel: the loss axis' label.

    Returns:
        The path written (``compiler.atomic.atomic_write``'s).

    Raises:
        ModelFileError: ``path`` cannot be written.
    """
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, curve in curves.items():
        ax.plot([point[0] for point in curve], [point[1] for point in curve], label=label, lw=1)
    ax.set_yscale("log")
    ax.set_xlabel("optimizer step (1,024 activations each)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(title)
    fig.tight_layout()
    out = atomic_write(path, lambda temporary: fig.savefig(temporary, dpi=110))
    plt.close(fig)
    return out
