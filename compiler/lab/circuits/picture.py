"""A picture of a circuit as a wiring diagram that stays readable from a few edges to hundreds.

Components are boxes in columns (the embeddings, then each block's heads and its MLP, then the
unembedding). Every s-op a component writes leaves it on a horizontal *lane* of its own, drawn
below the boxes and labelled once with the s-op's name; every input port (a head's q, k and v, an
MLP's or the unembedding's input) has a vertical *tap* that rises from the lanes to the port. A
dot where a lane crosses a tap is an edge carrying that s-op: filled blue when the edge is in the
circuit, hollow red when the weights read it but this ablation removes it. An edge in the
measured circuit that carries no s-op (interference, in a superposed variant) sits on its
source's lane "(other)". So edges are never drawn one line each: the picture holds one line per
lane and per tap, however many edges meet.

A wide model wraps: columns fill bands of at most `MAX_BAND_WIDTH` inches stacked top to bottom,
and a lane that runs on into the next band is labelled again at that band's left edge. Sizes are
in inches (one data unit is one inch), so text keeps its size and never overprints: lanes are
further apart than a label is tall, labels sit left of their lane's start where no other lane
runs, and the figure is sized to every artist it holds.
"""

from __future__ import annotations

import dataclasses
import os

import matplotlib

matplotlib.use("Agg")

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from compiler.atomic import atomic_write
from compiler.lab.circuits.components import Component
from compiler.lab.circuits.record import CircuitRecord

DPI = 150
MAX_BAND_WIDTH = 12.0  # inches of columns in one band before the picture wraps
BOX_W, BOX_H = 0.62, 0.46  # a component's box
STACK_GAP = 0.12  # between two heads of one block, stacked
TAP = 0.075  # between two taps (or two source stubs) beside a box
GUTTER = 0.07  # between a box and its nearest tap or stub
COLUMN_GAP = 0.1
LANE = 0.14  # between two lanes: more than a label's height
LANES_BELOW_BOXES = 0.22
BAND_GAP = 0.45
MARGIN = 0.12
PORTS = ("q", "k", "v")
PORT_HEIGHT = {"q": 0.14, "k": 0.0, "v": -0.14, "in": 0.0}
OTHER = "(other)"  # the lane of a measured circuit edge that carries no s-op

BLUE, RED = "#1f4e9c", "#c0392b"
NAME_SIZE, PORT_SIZE, LANE_SIZE, NOTE_SIZE, TITLE_SIZE = 7.0, 5.5, 6.0, 6.5, 9.0


@dataclasses.dataclass(frozen=True)
class _Column:
    """One column of boxes: its components top to bottom and its taps and stubs."""

    names: tuple[str, ...]
    taps: tuple[str, ...]  # destination ports ("component.port"), outermost (highest) first
    stubs: tuple[str, ...]  # sources whose lanes leave from this column, outermost first
    width: float


@dataclasses.dataclass(frozen=True)
class _Lane:
    source: str
    sop: str
    dots: tuple[tuple[str, bool], ...]  # (destination port, in the circuit)


def _short(name: str) -> str:
    return (name.replace("layer ", "L").replace(" attn head ", " H").replace(" mlp", " MLP")
            .replace("embed tokens", "tokens").replace("embed positions", "positions"))


def _column_key(component: Component, last_block: int) -> int:
    """Column order: embeddings, then per block its heads and its MLP, then the unembedding."""
    if component.kind == "embed":
        return 0
    if component.kind == "unembed":
        return 3 + 2 * last_block
    return 1 + 2 * (component.block or 0) + (1 if component.kind == "mlp" else 0)


def _lanes(record: CircuitRecord) -> tuple[_Lane, ...]:
    """One lane per (source, s-op) some drawn edge carries, in the order of the sources."""
    dots: dict[tuple[str, str], list[tuple[str, bool]]] = {}
    for edge, on, structural, carries in zip(record.edges, record.circuit, record.structural, record.carries):
        if not (on or structural):
            continue
        for sop in carries or (OTHER,):
            dots.setdefault((edge.src, sop), []).append((edge.dst, on))
    order = {c.name: i for i, c in enumerate(record.components)}
    written = {c.name: c.writes for c in record.components}

    def rank(key: tuple[str, str]) -> tuple[int, int]:
        source, sop = key
        sops = written.get(source, ())
        return order[source], sops.index(sop) if sop in sops else len(sops)

    return tuple(_Lane(source, sop, tuple(dots[(source, sop)])) for source, sop in sorted(dots, key=rank))


def _columns(record: CircuitRecord, lanes: tuple[_Lane, ...]) -> list[_Column]:
    grouped: dict[int, list[str]] = {}
    last_block = max((c.block or 0) for c in record.components)
    for component in record.components:
        grouped.setdefault(_column_key(component, last_block), []).append(component.name)
    tapped = {dst for lane in lanes for dst, _ in lane.dots}
    sources = {lane.source for lane in lanes}
    columns = []
    for key in sorted(grouped):
        names = tuple(grouped[key])
        taps = tuple(f"{name}.{port}" for name in names for port in (*PORTS, "in") if f"{name}.{port}" in tapped)
        stubs = tuple(name for name in names if name in sources)
        width = (GUTTER + TAP * len(taps)) + BOX_W + (GUTTER + TAP * len(stubs)) + COLUMN_GAP
        columns.append(_Column(names, taps, stubs, width))
    return columns


def _bands(columns: list[_Column]) -> list[list[int]]:
    """Column indices per band: as many columns as fit in `MAX_BAND_WIDTH` (at least one)."""
    bands: list[list[int]] = [[]]
    used = 0.0
    for index, column in enumerate(columns):
        if bands[-1] and used + column.width > MAX_BAND_WIDTH:
            bands.append([])
            used = 0.0
        bands[-1].append(index)
        used += column.width
    return bands


def draw(record: CircuitRecord, path: str | os.PathLike | None = None, title: str | None = None) -> Figure:
    """Draw `record` as a wiring diagram (and write it to `path` as PNG, atomically, when given).

    Args:
        record: the circuit record: its components, edges, circuit, structural edges and the
            s-ops they carry.
        path: where to write the picture as PNG at `DPI` (missing folders are created); None
            writes nothing.
        title: the figure's title; None states the program, variant, ablation, circuit size and
            whether the circuit is sufficient and necessary.
    Returns:
        The matplotlib `Figure` (drawn on the Agg backend, never shown), sized in inches to hold
        every artist it draws.
    Raises:
        ModelFileError: `path` cannot be written (`compiler.atomic.atomic_write`).
    """
    lanes = _lanes(record)
    columns = _columns(record, lanes)
    bands = _bands(columns)
    column_of = {name: i for i, column in enumerate(columns) for name in column.names}
    band_of = {i: b for b, indices in enumerate(bands) for i in indices}
    kind_of = {c.name: c.kind for c in record.components}

    def port_band(port: str) -> int:
        return band_of[column_of[port.rsplit(".", 1)[0]]]

    last_band = {(lane.source, lane.sop): max(port_band(dst) for dst, _ in lane.dots) for lane in lanes}
    in_circuit = {e.src for e, on in zip(record.edges, record.circuit) if on} | {
        e.dst.rsplit(".", 1)[0] for e, on in zip(record.edges, record.circuit) if on}

    figure = Figure()
    canvas = FigureCanvasAgg(figure)
    ax = figure.add_axes((0.0, 0.0, 1.0, 1.0))
    ax.axis("off")

    def line(xs, ys, on: bool, z: float = 1.0) -> None:
        ax.plot(xs, ys, color=BLUE if on else RED, lw=1.5 if on else 0.8, ls="-" if on else (0, (3, 2)),
                alpha=0.95 if on else 0.7, solid_capstyle="butt", zorder=z, clip_on=False)

    def text(x: float, y: float, s: str, **style) -> None:
        ax.text(x, y, s, clip_on=False, **style)

    top = 0.0
    extent = [0.0, 0.0, 0.0, 0.0]  # x0, x1, y0, y1 of the geometry (texts are added after)
    for b, indices in enumerate(bands):
        # x of every box, tap and stub of this band
        x = 0.0
        box_x: dict[str, float] = {}
        tap_x: dict[str, float] = {}
        stub_x: dict[str, float] = {}
        for i in indices:
            column = columns[i]
            left = x + GUTTER + TAP * len(column.taps)
            for k, tap in enumerate(column.taps):
                tap_x[tap] = x + TAP * (k + 0.5)
            for name in column.names:
                box_x[name] = left + BOX_W / 2
            for k, stub in enumerate(column.stubs):
                stub_x[stub] = left + BOX_W + GUTTER + TAP * (len(column.stubs) - k - 0.5)
            x += column.width
        band_left, band_right = -0.05, x - COLUMN_GAP + 0.05
        stack = max(len(columns[i].names) for i in indices)
        box_y = {name: top - BOX_H / 2 - k * (BOX_H + STACK_GAP)
                 for i in indices for k, name in enumerate(columns[i].names)}
        boxes_bottom = top - stack * BOX_H - (stack - 1) * STACK_GAP

        # lanes alive in this band, the latest source nearest the boxes
        alive = [lane for lane in lanes if band_of[column_of[lane.source]] <= b <= last_band[(lane.source, lane.sop)]]
        lane_y = {(lane.source, lane.sop): boxes_bottom - LANES_BELOW_BOXES - LANE * k
                  for k, lane in enumerate(reversed(alive))}
        bottom = boxes_bottom - LANES_BELOW_BOXES - LANE * max(len(alive) - 1, 0)

        # components
        for name, y in box_y.items():
            cx = box_x[name]
            active = name in in_circuit
            ax.add_patch(FancyBboxPatch((cx - BOX_W / 2, y - BOX_H / 2), BOX_W, BOX_H, boxstyle="round,pad=0.01",
                                        fc="#dce8f7" if active else "#f2f2f2", ec=BLUE if active else "#aaaaaa",
                                        lw=1.2 if active else 0.7, zorder=3, clip_on=False))
            head = kind_of[name] == "head"
            text(cx + (0.05 if head else 0.0), y, _short(name), ha="center", va="center", fontsize=NAME_SIZE,
                 weight="bold" if active else "normal", zorder=4)
            if head:
                for port in PORTS:
                    text(cx - BOX_W / 2 + 0.04, y + PORT_HEIGHT[port], port, ha="left", va="center",
                         fontsize=PORT_SIZE, color="#444444", zorder=4)

        # stubs: from a source's box down to its lowest lane in this band
        for source, sx in stub_x.items():
            own = [lane for lane in alive if lane.source == source]
            if not own:
                continue
            y0 = box_y[source]
            on = any(on for lane in own for _, on in lane.dots)
            line([box_x[source] + BOX_W / 2, sx, sx], [y0, y0, min(lane_y[(source, lane.sop)] for lane in own)], on, 2)

        # lanes: blue to the last circuit dot, dashed red on to the last dot read by the weights
        for lane in alive:
            y = lane_y[(lane.source, lane.sop)]
            start = stub_x.get(lane.source, band_left)
            in_band = [(tap_x[dst], on) for dst, on in lane.dots if dst in tap_x]
            runs_on = last_band[(lane.source, lane.sop)] > b
            later_on = any(on and port_band(dst) > b for dst, on in lane.dots)
            end_on = band_right if later_on else max((tx for tx, on in in_band if on), default=start)
            end = band_right if runs_on else max(tx for tx, _ in in_band)
            if end_on > start:
                line([start, end_on], [y, y], True, 1)
            if end > end_on:
                line([end_on, end], [y, y], False, 1)
            for tx, on in in_band:
                ax.plot([tx], [y], marker="o", ms=3.6, mfc=BLUE if on else "white", mec=BLUE if on else RED,
                        mew=0.9, zorder=5, clip_on=False)
            label = lane.sop if lane.source in stub_x else f"{lane.sop} ({_short(lane.source)})"
            text(start - 0.03, y, label, ha="right", va="center", fontsize=LANE_SIZE, zorder=6,
                 color=BLUE if any(on for _, on in lane.dots) else RED,
                 bbox=dict(boxstyle="square,pad=0.08", fc="white", ec="none", alpha=0.85))
            if runs_on:
                text(band_right + 0.03, y, "→", ha="left", va="center", fontsize=LANE_SIZE, color="#555555")

        # taps: from the lowest dot up to the port
        for tap, tx in tap_x.items():
            component, port = tap.rsplit(".", 1)
            hits = [(lane_y[(lane.source, lane.sop)], on) for lane in alive for dst, on in lane.dots if dst == tap]
            py = box_y[component] + PORT_HEIGHT[port]
            low_on = min((y for y, on in hits if on), default=None)
            low = min(y for y, _ in hits)
            if low_on is not None:
                line([tx, tx], [low_on, py], True, 1)
            if low_on is None or low < low_on:
                line([tx, tx], [low, low_on if low_on is not None else py], False, 1)
            edge_x = box_x[component] - BOX_W / 2
            ax.annotate("", xy=(edge_x, py), xytext=(tx, py), annotation_clip=False,
                        arrowprops=dict(arrowstyle="-|>", mutation_scale=7, shrinkA=0, shrinkB=0,
                                        color=BLUE if low_on is not None else RED, lw=1.2 if low_on is not None else 0.8))

        extent = [min(extent[0], band_left), max(extent[1], band_right + 0.15), min(extent[2], bottom - 0.1),
                  max(extent[3], top)]
        top = bottom - BAND_GAP

    v = record.verification
    note_y = extent[2] - 0.15
    text(0.0, note_y, "each lane: an s-op its component writes   ● an edge in the circuit   ○ read by the weights, "
         "removed by this ablation   no dot: the port does not read it", ha="left", va="top",
         fontsize=NOTE_SIZE, color="#333333")
    text(0.0, extent[3] + 0.2, title or (
        f"{record.program}: variant {record.variant}, {record.ablation} ablation — {sum(record.circuit)} of "
        f"{len(record.edges)} edges; sufficient {v.sufficient}, necessary {v.necessary}"),
        ha="left", va="bottom", fontsize=TITLE_SIZE)
    _fit(figure, ax, extent, canvas)
    if path is not None:
        atomic_write(path, lambda temporary: figure.savefig(temporary, dpi=DPI, format="png"))
    return figure


def _fit(figure: Figure, ax, extent: list[float], canvas: FigureCanvasAgg) -> None:
    """Size the figure (one data unit is one inch) to the geometry and every text, with a margin."""
    x0, x1, y0, y1 = extent
    figure.set_size_inches(x1 - x0, y1 - y0)
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    figure.set_dpi(DPI)
    renderer = canvas.get_renderer()  # after sizing: a renderer is made for one size and dpi
    inverse = ax.transData.inverted()
    for artist in ax.texts:
        (a, c), (b, d) = inverse.transform(artist.get_window_extent(renderer).get_points())
        x0, x1, y0, y1 = min(x0, a), max(x1, b), min(y0, c), max(y1, d)
    x0, x1, y0, y1 = x0 - MARGIN, x1 + MARGIN, y0 - MARGIN, y1 + MARGIN
    figure.set_size_inches(x1 - x0, y1 - y0)
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
