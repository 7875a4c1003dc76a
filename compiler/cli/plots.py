"""Pictures of a compiled model (matplotlib, no pyplot state, Agg rendering).

* `plot_residuals`: the residual stream after the embedding and after every sub-layer for one
  input, one labelled heatmap panel per sub-layer, the entries that sub-layer changed outlined
  (the Tracr paper's Figure 2).
* `plot_attention`: the attention pattern of every head for one input.
* `plot_head` / `plot_heads`: `W_QK` and `W_OV` of a head as labelled residual-by-residual
  matrices, restricted to the rows and columns with a non-zero entry.

Each function returns the `matplotlib.figure.Figure` and writes it when given a path; the
format follows the path's suffix (`.png`, `.svg`, `.pdf`: vector formats for papers) and `dpi`
sets the resolution of raster formats (default 150). The residual and attention pictures use
matplotlib's constrained layout; the head pictures are laid out in inches from their labels
(`_HeadRow`), so every matrix cell is a square of `CELL` inches (a 1 x 1 `W_OV` is one small
cell, not a stretched square) and titles, tick labels and colour bars never overlap. Saving
crops to the drawn content, so no label is cut.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import textwrap
from collections.abc import Hashable, Sequence

import matplotlib

matplotlib.use("Agg")

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from compiler.atomic import atomic_write
from compiler.cli.head_notes import head_note
from compiler.cli.summary import changed_entries
from compiler.model.compiled_model import ApplyResult, CompiledModel
from compiler.model.config import AttentionSpec
from compiler.model.weights import head_weights

CHANGED_COLOR = "#e6a000"
CMAP = "RdBu_r"
# Cell values are printed inside a matrix panel when it has at most this many cells.
ANNOTATE_CELLS = 400
# Characters per line of the note under a head's title (what it writes, what was folded in).
NOTE_WIDTH = 90
DEFAULT_DPI = 150
CELL = 0.3  # inches per matrix cell (rows and columns alike)
TICK_FONT = 7
CHAR = 0.062  # inches per character of a tick label at TICK_FONT
BAR_GAP, BAR_WIDTH, BAR_HEIGHT = 0.08, 0.1, 1.2  # a matrix's colour bar, inches
PANEL_GAP = 0.6  # inches between a head's two panels
SHORT_PANEL = 1.3  # inches: a panel lower than this names its rows in its title
FORMATS = (".png", ".svg", ".pdf")

PathLike = str | os.PathLike


def _save(figure: Figure, path: PathLike | None, dpi: float = DEFAULT_DPI) -> Figure:
    if path is not None:
        atomic_write(path, lambda temporary: figure.savefig(temporary, dpi=dpi, bbox_inches="tight", pad_inches=0.05))
    return figure


def _label_inches(labels: Sequence[str]) -> float:
    """Room a column of tick labels needs (the longest label)."""
    return CHAR * max((len(label) for label in labels), default=1) + 0.15


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


def _empty_sublayers(model: CompiledModel) -> set[int]:
    """Stage indices (1 + sub-layer index) of sub-layers without a head or a hidden unit."""
    empty = set()
    for position, index in enumerate(model.config.layer_order):  # a tied block once per iteration
        layer = model.config.layers[index]
        size = len(layer.heads) if isinstance(layer, AttentionSpec) else layer.w_in.shape[1]
        if not size:
            empty.add(position + 1)
    return empty


def plot_residuals(
    model: CompiledModel,
    tokens: Sequence[Hashable],
    path: PathLike | None = None,
    result: ApplyResult | None = None,
    dpi: float = DEFAULT_DPI,
) -> Figure:
    """One panel per residual snapshot (embedding, then every sub-layer) for one input.

    Rows are the residual directions (labels), columns the positions (headed by the tokens);
    the entries a sub-layer changed are outlined. Sub-layers that hold nothing (no head, no
    hidden unit: the layout pads a layer's missing half) get no panel; the title names them.
    `result` may pass an existing `model.apply(tokens)`.
    """
    result = result if result is not None else model.apply(tokens)
    labels = model.residual_labels
    empty = _empty_sublayers(model)
    stages = [r.values.T for r in result.residuals]  # [D, T] each
    shown = [i for i in range(len(stages)) if i not in empty]
    limit = _symmetric_limit(*stages)
    length = stages[0].shape[1]
    token_room = _label_inches(_token_text(tokens[:length]))
    width = len(shown) * (length * CELL + 0.15) + _label_inches(labels) + 1.3
    height = len(labels) * CELL + token_room + 1.2
    figure = Figure(figsize=(width, height), layout="constrained")
    axes = figure.subplots(1, len(shown), sharey=True, squeeze=False)[0]
    image = None
    for ax, index in zip(axes, shown):
        values = stages[index]
        image = ax.imshow(values, cmap=CMAP, vmin=-limit, vmax=limit, aspect="equal", interpolation="nearest")
        ax.set_title(result.residuals[index].name.replace(" (", "\n(", 1), fontsize=9)  # a loop's iteration below
        ax.set_xticks(range(length), _token_text(tokens[:length]), fontsize=TICK_FONT, rotation=90)
        ax.set_yticks(range(len(labels)), labels, fontsize=TICK_FONT)
        if index:
            _outline(ax, changed_entries(stages[index - 1], values))
    axes[0].set_ylabel("residual direction (s-op:value)", fontsize=8)
    figure.supxlabel("position (input token)", fontsize=8)
    title = "residual stream after each sub-layer (outlined: entries the sub-layer changed)"
    if empty:
        names = ", ".join(result.residuals[i].name for i in sorted(empty))
        title += f"\nnot shown, empty: {names}"
    figure.suptitle(title, fontsize=10)
    assert image is not None  # the embedding's panel is always shown
    figure.colorbar(image, ax=list(axes), shrink=min(1.0, 3.0 / max(height - 1.5, 1.0)), pad=0.02, aspect=25,
                    label="value")
    return _save(figure, path, dpi)


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
    dpi: float = DEFAULT_DPI,
) -> Figure:
    """The attention pattern (queries x keys) of every head for one input, one panel per head."""
    result = result if result is not None else model.apply(tokens)
    layers = model.config.layers
    # `result.attention` has one entry per attention sub-layer run, with or without heads (a
    # tied block's once per iteration); each head's title is its stage name, which says the
    # tied layer and iteration in a compiled loop.
    executed: list[tuple[int, AttentionSpec]] = []
    for position, index in enumerate(model.config.layer_order):
        layer = layers[index]
        if isinstance(layer, AttentionSpec):
            executed.append((position, layer))
    heads = [
        (entry, model.stage_names[position + 1].replace(" attn", f" head {head}", 1).replace(" (", "\n(", 1), head)
        for entry, (position, spec) in enumerate(executed)
        for head in range(len(spec.heads))
    ]
    if not heads:
        return _save(_empty(Figure(figsize=(4, 1.5)), "this model has no attention heads"), path, dpi)
    text = _token_text(tokens)
    side = CELL * len(text) + _label_inches(text) + 0.4
    figure = Figure(figsize=(side * len(heads) + 1.0, side + 0.9), layout="constrained")
    axes = figure.subplots(1, len(heads), squeeze=False)[0]
    image = None
    for ax, (entry, title, head) in zip(axes, heads):
        pattern = result.attention[entry][head]
        image = ax.imshow(pattern, cmap="Greys", vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(title, fontsize=9)
        ax.set_xticks(range(len(text)), text, fontsize=TICK_FONT, rotation=90)
        ax.set_yticks(range(len(text)), text, fontsize=TICK_FONT)
        ax.set_xlabel("key position", fontsize=8)
        ax.set_ylabel("query position", fontsize=8)
    assert image is not None  # there is a panel per head, and a head
    figure.colorbar(image, ax=list(axes), shrink=0.8, pad=0.01, label="attention weight")
    return _save(figure, path, dpi)


def _nonzero(matrix: np.ndarray, axis: int) -> np.ndarray:
    return np.flatnonzero(np.any(matrix != 0, axis=1 - axis))


def _matrix_panel(
    figure: Figure, ax: Axes, part: np.ndarray, rows: list[str], cols: list[str], title: str, names: tuple[str, str]
) -> None:
    """A labelled heatmap with square cells, its values written in the cells (when few) and a
    colour bar of its own scale beside it (at least 1.2 inches tall)."""
    ax.set_title(title, fontsize=9)
    if not part.size:
        ax.axis("off")
        ax.text(0.5, 0.5, "all zero", ha="center", va="center", transform=ax.transAxes, fontsize=8)
        return
    limit = _symmetric_limit(part)
    image = ax.imshow(part, cmap=CMAP, vmin=-limit, vmax=limit, aspect="auto", interpolation="nearest")
    ax.set_yticks(range(len(rows)), rows, fontsize=TICK_FONT)
    ax.set_xticks(range(len(cols)), cols, fontsize=TICK_FONT, rotation=90)
    if min(len(rows), len(cols)) * CELL >= SHORT_PANEL:
        ax.set_ylabel(names[0], fontsize=8)
        ax.set_xlabel(names[1], fontsize=8)
    else:  # axis titles longer than the panel would run into its title or colour bar
        ax.set_title(f"{title}\n(rows: {names[0]}; columns: {names[1]})", fontsize=9)
    if part.size <= ANNOTATE_CELLS:
        for (r, c), value in np.ndenumerate(part):
            if value:
                color = "white" if abs(value) > 0.6 * limit else "black"
                text = f"{value:.3g}"
                ax.text(c, r, text, ha="center", va="center", fontsize=7 if len(text) <= 3 else 5.5, color=color)
    height = max(len(rows) * CELL, BAR_HEIGHT)  # inches, from the matrix's top edge down
    bar = ax.inset_axes(
        (1 + BAR_GAP / (len(cols) * CELL), 1 - height / (len(rows) * CELL), BAR_WIDTH / (len(cols) * CELL), height / (len(rows) * CELL))
    )
    figure.colorbar(image, cax=bar)
    bar.tick_params(labelsize=TICK_FONT)


@dataclasses.dataclass(frozen=True)
class _Panel:
    """One matrix of a head restricted to its non-zero rows and columns, with their labels."""

    part: np.ndarray
    rows: list[str]
    cols: list[str]

    @staticmethod
    def of(matrix: np.ndarray, labels: Sequence[str]) -> _Panel:
        row_idx, col_idx = _nonzero(matrix, 0), _nonzero(matrix, 1)
        return _Panel(matrix[np.ix_(row_idx, col_idx)], [labels[i] for i in row_idx], [labels[i] for i in col_idx])

    @property
    def left(self) -> float:  # y label and tick labels
        return 0.3 + _label_inches(self.rows)

    @property
    def width(self) -> float:  # the cells
        return max(len(self.cols), 1) * CELL

    @property
    def right(self) -> float:  # the colour bar and its tick labels
        return BAR_GAP + BAR_WIDTH + 0.45

    @property
    def height(self) -> float:
        return max(len(self.rows), 1) * CELL

    @property
    def below(self) -> float:  # tick labels and x label
        return _label_inches(self.cols) + 0.35



@dataclasses.dataclass(frozen=True)
class _HeadRow:
    """A head's title (with the passes' note) and its W_QK and W_OV panels, sized in inches."""

    title: str
    panels: tuple[_Panel, _Panel]

    @staticmethod
    def of(model: CompiledModel, sublayer: int, head: int) -> _HeadRow:
        weights = head_weights(model, sublayer, head)
        labels = model.residual_labels
        note = head_note(model, sublayer, head)  # for a head a pass changed: what it absorbed
        title = _head_name(sublayer, head) + ("\n" + textwrap.fill(note, NOTE_WIDTH) if note else "")
        return _HeadRow(title, (_Panel.of(weights.w_qk, labels), _Panel.of(weights.w_ov, labels)))

    @property
    def top(self) -> float:  # the head's title and the panel titles (two lines for short panels)
        short = any(min(p.height, p.width) < SHORT_PANEL and p.part.size for p in self.panels)
        return 0.3 + 0.18 * self.title.count("\n") + 0.35 + 0.18 * short

    @property
    def width(self) -> float:
        return sum(p.left + p.width + p.right for p in self.panels) + PANEL_GAP

    @property
    def height(self) -> float:
        return self.top + max(max(p.height, BAR_HEIGHT) + p.below for p in self.panels)

    def draw(self, figure: Figure, top: float, size: tuple[float, float]) -> None:
        """Draw the row with its upper edge `top` inches below the figure's top."""
        width, height = size
        figure.text(0.5 / width, 1 - (top + 0.05) / height, self.title, fontsize=10, va="top", ha="left",
                    fontweight="bold")
        x = 0.0
        titles = ("W_QK: attention score", "W_OV: what is copied")
        names = (("query", "key"), ("read (value)", "written"))
        for panel, title, axis_names in zip(self.panels, titles, names):
            x += panel.left
            y = top + self.top + panel.height  # the panel's lower edge, from the top
            ax = figure.add_axes((x / width, 1 - y / height, panel.width / width, panel.height / height))
            _matrix_panel(figure, ax, panel.part, panel.rows, panel.cols, title, axis_names)
            x += panel.width + panel.right + PANEL_GAP


def _heads_figure(rows: Sequence[_HeadRow]) -> Figure:
    """Rows one under the other; every cell is CELL inches square, whatever the matrix size."""
    size = (max(row.width for row in rows), sum(row.height for row in rows))
    figure = Figure(figsize=size)
    top = 0.0
    for row in rows:
        row.draw(figure, top, size)
        top += row.height
    return figure


def plot_head(
    model: CompiledModel, sublayer: int, head: int, path: PathLike | None = None, dpi: float = DEFAULT_DPI
) -> Figure:
    """`W_QK` and `W_OV` of one head as labelled matrices; `sublayer` indexes `config.layers`."""
    return _save(_heads_figure([_HeadRow.of(model, sublayer, head)]), path, dpi)


def plot_heads(model: CompiledModel, path: PathLike | None = None, dpi: float = DEFAULT_DPI) -> Figure:
    """`W_QK` and `W_OV` of every head, one titled row per head."""
    heads = _attention_heads(model)
    if not heads:
        return _save(_empty(Figure(figsize=(4, 1.5)), "this model has no attention heads"), path, dpi)
    return _save(_heads_figure([_HeadRow.of(model, s, h) for s, h in heads]), path, dpi)


def plot_all(
    model: CompiledModel, tokens: Sequence[Hashable], path: PathLike, dpi: float = DEFAULT_DPI
) -> list[pathlib.Path]:
    """The `--plot` pictures: residual stream at `path`, `<stem>-attention` and `<stem>-heads`.

    Args:
      model: the compiled (or loaded) model.
      tokens: the input to picture, starting with BOS.
      path: where the residual picture goes; its suffix (`.png`, `.svg`, `.pdf`) sets the format
        of all three.
      dpi: resolution of raster formats.

    Returns:
      The three paths written.

    Raises:
      ValueError: the suffix is not one of `FORMATS`.
    """
    path = pathlib.Path(path)
    if path.suffix.lower() not in FORMATS:
        raise ValueError(
            f"cannot tell the picture format from {path.name!r}; end the path with one of {', '.join(FORMATS)}"
        )
    result = model.apply(tokens)
    attention = path.with_name(f"{path.stem}-attention{path.suffix}")
    heads = path.with_name(f"{path.stem}-heads{path.suffix}")
    plot_residuals(model, tokens, path, result=result, dpi=dpi)
    plot_attention(model, tokens, attention, result=result, dpi=dpi)
    plot_heads(model, heads, dpi=dpi)
    return [path, attention, heads]
