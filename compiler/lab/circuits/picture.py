"""A picture of a circuit: components as nodes in their layers, circuit edges drawn, others faint.

Columns are the embeddings, then each transformer block's heads and MLP, then the unembedding;
an edge ends at the top (q), middle (k) or bottom (v) of a head's box, so the three inputs stay
apart. Circuit edges are dark and labelled with the s-ops they carry (structural circuit);
edges outside the circuit are drawn faint; structural edges the ablation removed are dashed.
"""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from compiler.atomic import atomic_write
from compiler.lab.circuits.record import CircuitRecord

PORT_OFFSET = {"q": 0.22, "k": 0.0, "v": -0.22, "in": 0.0}
BOX_W, BOX_H = 0.9, 0.7


def _layout(record: CircuitRecord) -> dict[str, tuple[float, float]]:
    """Centre of every component: x by stage (embeddings, per block heads then MLP, unembed)."""
    columns: dict[float, list[str]] = {}
    for c in record.components:
        if c.kind == "embed":
            x = 0.0
        elif c.kind == "unembed":
            x = 2.0 * (max((d.block or 0) for d in record.components) + 1) + 1.0
        else:
            x = 1.0 + 2.0 * (c.block or 0) + (1.0 if c.kind == "mlp" else 0.0)
        columns.setdefault(x, []).append(c.name)
    places = {}
    for x, names in columns.items():
        for row, name in enumerate(names):
            # MLPs sit below the heads' row, so edges into heads do not cross their boxes.
            shift = -1.4 if name.endswith(" mlp") else 0.0
            places[name] = (x * 1.6, shift - 1.2 * (row - (len(names) - 1) / 2))
    return places


def _short(name: str) -> str:
    return (name.replace("layer ", "L").replace(" attn head ", " H").replace(" mlp", " MLP")
            .replace("embed tokens", "tokens").replace("embed positions", "positions"))


def draw(record: CircuitRecord, path: str | os.PathLike | None = None, title: str | None = None) -> Figure:
    """Draw `record` (and write it to `path` as PNG, atomically, when given).

    Args:
        record: the circuit record: its components, edges, circuit, structural edges and the
            s-ops they carry.
        path: where to write the picture as PNG (missing folders are created); None writes
            nothing.
        title: the figure's title; None states the program, variant, ablation, circuit size and
            whether the circuit is sufficient and necessary.
    Returns:
        The matplotlib `Figure` (drawn on the Agg backend, never shown).
    Raises:
        ModelFileError: `path` cannot be written (`compiler.atomic.atomic_write`).
    """
    places = _layout(record)
    xs = [p[0] for p in places.values()]
    ys = [p[1] for p in places.values()]
    figure = Figure(figsize=(max(6.0, 1.3 * (max(xs) - min(xs)) + 2.5), max(3.5, 1.1 * (max(ys) - min(ys)) + 2.5)))
    ax = figure.add_subplot()
    writes = {c.name: c.writes for c in record.components}
    for edge, on, structural, carries in zip(record.edges, record.circuit, record.structural, record.carries):
        component, port = edge.dst.rsplit(".", 1)
        (x0, y0), (x1, y1) = places[edge.src], places[component]
        start, end = (x0 + BOX_W / 2, y0), (x1 - BOX_W / 2, y1 + PORT_OFFSET[port])
        if on:
            style = dict(color="#1f4e9c", lw=2.2, alpha=0.95, ls="-")
        elif structural:
            style = dict(color="#c0392b", lw=1.2, alpha=0.6, ls="--")
        else:
            style = dict(color="#999999", lw=0.6, alpha=0.25, ls="-")
        bend = 0.15 if abs(y1 - y0) < 1e-6 and x1 - x0 > 2.5 else 0.0
        ax.annotate("", xy=end, xytext=start,
                    arrowprops=dict(arrowstyle="-|>", mutation_scale=9, connectionstyle=f"arc3,rad={bend}", **style))
        if on and carries:
            ax.text((start[0] + end[0]) / 2, (start[1] + end[1]) / 2 + 0.06, ", ".join(carries), fontsize=6.5,
                    color="#1f4e9c", ha="center", va="bottom",
                    bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.8))
    used = {e.src for e, on in zip(record.edges, record.circuit) if on} | {
        e.dst.rsplit(".", 1)[0] for e, on in zip(record.edges, record.circuit) if on}
    for name, (x, y) in places.items():
        active = name in used
        ax.add_patch(FancyBboxPatch((x - BOX_W / 2, y - BOX_H / 2), BOX_W, BOX_H, boxstyle="round,pad=0.02",
                                    fc="#dce8f7" if active else "#f2f2f2", ec="#1f4e9c" if active else "#aaaaaa",
                                    lw=1.4 if active else 0.8))
        ax.text(x, y + 0.08, _short(name), ha="center", va="center", fontsize=8, weight="bold" if active else "normal")
        wrote = ", ".join(writes.get(name, ()))
        if wrote:
            ax.text(x, y - 0.18, wrote[:18], ha="center", va="center", fontsize=6, color="#444444")
        if name.startswith("layer") and "head" in name:
            for port, offset in PORT_OFFSET.items():
                if port != "in":
                    ax.text(x - BOX_W / 2 - 0.02, y + offset, port, fontsize=5.5, ha="right", va="center", color="#555555")
    v = record.verification
    ax.set_title(title or (
        f"{record.program}: variant {record.variant}, {record.ablation} ablation — {sum(record.circuit)} of "
        f"{len(record.edges)} edges; sufficient {v.sufficient}, necessary {v.necessary}"), fontsize=9)
    ax.text(0.0, -0.02, "solid blue: circuit (labels: s-ops carried)   dashed red: read by the weights, removed by "
            "this ablation   faint: not in the circuit", transform=ax.transAxes, fontsize=6.5, va="top", color="#333333")
    ax.set_xlim(min(xs) - 1.0, max(xs) + 1.0)
    ax.set_ylim(min(ys) - 0.9, max(ys) + 0.9)
    ax.set_aspect("equal")
    ax.axis("off")
    if path is not None:
        atomic_write(path, lambda temporary: figure.savefig(temporary, dpi=150, bbox_inches="tight", format="png"))
    return figure
