"""Pictures of a compiled model (matplotlib, no pyplot state, Agg rendering).

* `plot_residuals`: the residual stream after the embedding and after every sub-layer for one
  input, one labelled heatmap panel per sub-layer, the entries that sub-layer changed outlined
  (the Tracr paper's Figure 2).
* `plot_attention`: the attention pattern of every head for one input.
* `plot_head` / `plot_heads`: `W_QK` and `W_OV` of a head as labelled residual-by-residual
  matrices, restricted to the rows and columns with a non-zero entry.

Each function returns the `matplotlib.figure.Figure` and writes it when given a path.
"""

from __future__ import annotations

import os
import pathlib
import textwrap
from collections.abc import Hashable, Sequence

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from compiler.model.compiled_model import ApplyResult, CompiledModel  # noqa: E402
from compiler.model.config import AttentionSpec  # noqa: E402
from compiler.cli.summary import changed_entries  # noqa: E402
from compiler.io.atomic import atomic_write  # noqa: E402
from compiler.model.weights import head_weights  # noqa: E402
from compiler.cli.head_notes import head_note  # noqa: E402

CHANGED_COLOR = "#e6a000"
CMAP = "RdBu_r"
# Cell values are printed inside a matrix panel when it has at most this many cells.
ANNOTATE_CELLS = 400
# Characters per line of the note under a head's W_OV title (what it writes, what was folded in).
NOTE_WIDTH = 48

PathLike = str | os.PathLike


def _save(figure: Figure, path: PathLike | None) -> Figure:
    if path is not None:
        atomic_write(path, lambda temporary: figure.savefig(temporary, dpi=110, bbox_inches="tight"))
    return figure


def _symmetric_limit(*arrays: np.ndarray) -> float:
    largest = max((float(np.max(np.abs(a))) for a in arrays if a.size), default=0.0)
    return largest or 1.0


def _token_text(tokens: Sequence[Hashable]) -> list[str]:
    return [str(t) for t in tokens]


def _outline(axes: Axes, mask: np.ndarray) -> None:
    for row, col in zip(*np.nonzero(mask)):
        axes.add_patch(
            Rectangle((col - 0.5, row - 0.5), 1, 1, fill=False, edgecolor=CHANGED_COLOR, linewidth=1.6)
        )


def plot_residuals(
    model: CompiledModel,
    tokens: Sequence[Hashable],
    path: PathLike | None = None,
    result: ApplyResult | None = None,
) -> Figure:
    """One panel per residual snapshot (embedding, then every sub-layer) for one input.

    Rows are the residual labels, columns the positions (headed by the tokens); the entries a
    sub-layer changed are outlined. `result` may pass an existing `model.apply(tokens)`.
    """
    result = result if result is not None else model.apply(tokens)
    labels = model.residual_labels
    stages = [r.values.T for r in result.residuals]  # [D, T] each
    limit = _symmetric_limit(*stages)
    length = stages[0].shape[1]
    figure = Figure(
        figsize=(max(4.0, len(stages) * (0.42 * length + 0.7) + 2.5), 0.24 * len(labels) + 2.0)
    )
    axes = figure.subplots(1, len(stages), sharey=True, squeeze=False)[0]
    image = None
    for index, (ax, snapshot, values) in enumerate(zip(axes, result.residuals, stages)):
        image = ax.imshow(values, cmap=CMAP, vmin=-limit, vmax=limit, aspect="auto", interpolation="nearest")
        ax.set_title(snapshot.name, fontsize=9)
        ax.set_xticks(range(length), _token_text(tokens[:length]), fontsize=7, rotation=90)
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        if index:
            _outline(ax, changed_entries(stages[index - 1], values))
    figure.suptitle("residual stream (outlined: entries changed by the sub-layer)", fontsize=10)
    figure.colorbar(image, ax=list(axes), shrink=0.6, pad=0.01)
    return _save(figure, path)


def _attention_heads(model: CompiledModel) -> list[tuple[int, int]]:
    """`(sub-layer index, head)` of every head in the model."""
    return [
        (index, head)
        for index, layer in enumerate(model.config.layers)
        if isinstance(layer, AttentionSpec)
        for head in range(len(layer.heads))
    ]


def _head_name(sublayer: int, head: int) -> str:
    return f"layer {sublayer // 2} head {head}"


def _empty(figure: Figure, text: str) -> Figure:
    ax = figure.subplots()
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center")
    return figure


def plot_attention(
    model: CompiledModel,
    tokens: Sequence[Hashable],
    path: PathLike | None = None,
    result: ApplyResult | None = None,
) -> Figure:
    """The attention pattern (queries x keys) of every head for one input, one panel per head."""
    result = result if result is not None else model.apply(tokens)
    heads = _attention_heads(model)
    if not heads:
        return _save(_empty(Figure(figsize=(4, 1.5)), "this model has no attention heads"), path)
    layers = model.config.layers
    # `result.attention` has one entry per attention sub-layer, with or without heads.
    attention_index = {
        index: sum(isinstance(layer, AttentionSpec) for layer in layers[:index]) for index, _ in heads
    }
    text = _token_text(tokens)
    side = 0.35 * len(text) + 1.2
    figure = Figure(figsize=(side * len(heads) + 1.0, side + 0.8))
    axes = figure.subplots(1, len(heads), squeeze=False)[0]
    image = None
    for ax, (sublayer, head) in zip(axes, heads):
        pattern = result.attention[attention_index[sublayer]][head]
        image = ax.imshow(pattern, cmap="Greys", vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(_head_name(sublayer, head), fontsize=9)
        ax.set_xticks(range(len(text)), text, fontsize=7, rotation=90)
        ax.set_yticks(range(len(text)), text, fontsize=7)
        ax.set_xlabel("key", fontsize=8)
        ax.set_ylabel("query", fontsize=8)
    figure.colorbar(image, ax=list(axes), shrink=0.7, pad=0.01)
    return _save(figure, path)


def _nonzero(matrix: np.ndarray, axis: int) -> np.ndarray:
    return np.flatnonzero(np.any(matrix != 0, axis=1 - axis))


def _matrix_panel(ax: Axes, matrix: np.ndarray, labels: Sequence[str], title: str, rows: str, cols: str) -> None:
    row_idx, col_idx = _nonzero(matrix, 0), _nonzero(matrix, 1)
    ax.set_title(title, fontsize=9)
    if not row_idx.size:
        ax.axis("off")
        ax.text(0.5, 0.5, "all zero", ha="center", va="center", transform=ax.transAxes)
        return
    part = matrix[np.ix_(row_idx, col_idx)]
    limit = _symmetric_limit(part)
    ax.imshow(part, cmap=CMAP, vmin=-limit, vmax=limit, aspect="auto", interpolation="nearest")
    ax.set_yticks(range(len(row_idx)), [labels[i] for i in row_idx], fontsize=7)
    ax.set_xticks(range(len(col_idx)), [labels[i] for i in col_idx], fontsize=7, rotation=90)
    ax.set_ylabel(rows, fontsize=8)
    ax.set_xlabel(cols, fontsize=8)
    if part.size <= ANNOTATE_CELLS:
        for (r, c), value in np.ndenumerate(part):
            if value:
                color = "white" if abs(value) > 0.6 * limit else "black"
                ax.text(c, r, f"{value:.3g}", ha="center", va="center", fontsize=5, color=color)


def _head_size(model: CompiledModel, sublayer: int, head: int) -> tuple[int, int]:
    weights = head_weights(model, sublayer, head)
    sizes = [(_nonzero(m, 0).size, _nonzero(m, 1).size) for m in (weights.w_qk, weights.w_ov)]
    return max(s[0] for s in sizes), sum(s[1] for s in sizes)


def _draw_head(axes: Sequence[Axes], model: CompiledModel, sublayer: int, head: int) -> None:
    weights = head_weights(model, sublayer, head)
    labels = model.residual_labels
    name = _head_name(sublayer, head)
    note = head_note(model, sublayer, head)  # for a head a pass changed: what it absorbed
    below = "\n" + textwrap.fill(note, NOTE_WIDTH) if note else ""
    _matrix_panel(axes[0], weights.w_qk, labels, f"{name}: W_QK", "query", "key")
    _matrix_panel(axes[1], weights.w_ov, labels, f"{name}: W_OV{below}", "read (value)", "written")


def plot_head(model: CompiledModel, sublayer: int, head: int, path: PathLike | None = None) -> Figure:
    """`W_QK` and `W_OV` of one head as labelled matrices; `sublayer` indexes `config.layers`."""
    rows, cols = _head_size(model, sublayer, head)
    figure = Figure(figsize=(0.3 * cols + 4.5, 0.3 * rows + 2.5))
    _draw_head(figure.subplots(1, 2, squeeze=False)[0], model, sublayer, head)
    return _save(figure, path)


def plot_heads(model: CompiledModel, path: PathLike | None = None) -> Figure:
    """`W_QK` and `W_OV` of every head, one row per head."""
    heads = _attention_heads(model)
    if not heads:
        return _save(_empty(Figure(figsize=(4, 1.5)), "this model has no attention heads"), path)
    sizes = [_head_size(model, s, h) for s, h in heads]
    width = 0.3 * max(c for _, c in sizes) + 4.5
    heights = [0.3 * r + 2.0 for r, _ in sizes]
    figure = Figure(figsize=(width, sum(heights)))
    axes = figure.subplots(len(heads), 2, squeeze=False, gridspec_kw={"height_ratios": heights})
    for row, (sublayer, head) in zip(axes, heads):
        _draw_head(row, model, sublayer, head)
    return _save(figure, path)


def plot_all(model: CompiledModel, tokens: Sequence[Hashable], path: PathLike) -> list[pathlib.Path]:
    """The `--plot` pictures: residual stream at `path`, `<stem>-attention` and `<stem>-heads`."""
    path = pathlib.Path(path)
    result = model.apply(tokens)
    attention = path.with_name(f"{path.stem}-attention{path.suffix}")
    heads = path.with_name(f"{path.stem}-heads{path.suffix}")
    plot_residuals(model, tokens, path, result=result)
    plot_attention(model, tokens, attention, result=result)
    plot_heads(model, heads)
    return [path, attention, heads]
