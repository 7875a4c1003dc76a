"""The circuit picture stays readable on the largest library program: no two texts overlap, no
dot hides under a label, nothing falls outside the figure, the width is bounded and every head's
q, k and v ports are labelled inside its box."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from matplotlib.patches import FancyBboxPatch

from compiler.examples import LOOP_EXAMPLES
from compiler.lab.circuits import InputDistribution, circuit_records, draw
from compiler.lab.circuits.picture import DPI, MAX_BAND_WIDTH, OTHER, PORTS


@pytest.fixture(scope="module")
def parity_loop_picture(tmp_path_factory):
    """parity_loop at its library length: 278 edges, the most of any library program."""
    example = LOOP_EXAMPLES["parity_loop"]
    (record,) = circuit_records(example.build(example.max_seq_len), tuple(example.vocab), example.max_seq_len,
                                ablations=["zero"], distribution=InputDistribution(16, seed=0))
    path = tmp_path_factory.mktemp("picture") / "parity.png"
    figure = draw(record, path)
    return record, figure, path


def _boxes(figure):
    renderer = figure.canvas.get_renderer()
    ax = figure.axes[0]
    texts = [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts]
    dots = [ax.transData.transform(np.column_stack(line.get_data()))[0] for line in ax.lines
            if line.get_marker() == "o"]
    boxes = [p.get_window_extent(renderer) for p in ax.patches if isinstance(p, FancyBboxPatch)]
    return renderer, ax, texts, dots, boxes


def test_the_largest_library_circuit_is_drawn_without_overlap_or_clipping(parity_loop_picture):
    record, figure, path = parity_loop_picture
    assert len(record.edges) == 278 and path.read_bytes()[:4] == b"\x89PNG"
    renderer, ax, texts, dots, boxes = _boxes(figure)
    assert len(dots) == sum(max(len(c), 1) for c, on, s in zip(record.carries, record.circuit, record.structural)
                            if on or s)  # a dot for every s-op of every drawn edge
    for (a, box_a), (b, box_b) in itertools.combinations(texts, 2):
        assert not box_a.overlaps(box_b), f"{a!r} overprints {b!r}"
    for text, box in texts:  # a dot under a label would hide an edge (1 px of antialiasing allowed)
        assert not any(box.x0 + 1 < x < box.x1 - 1 and box.y0 + 1 < y < box.y1 - 1 for x, y in dots), text
    whole = figure.bbox
    artists = [box for _, box in texts] + boxes + [line.get_window_extent(renderer) for line in ax.lines]
    for box in artists:
        assert whole.x0 <= box.x0 and box.x1 <= whole.x1 and whole.y0 <= box.y0 and box.y1 <= whole.y1, box
    width, height = figure.get_size_inches()
    assert width <= MAX_BAND_WIDTH + 3.0 and figure.dpi == DPI  # wrapped into bands of bounded width
    assert height > 2 * 3.0  # parity_loop's 18 columns take two bands


def test_every_head_shows_its_ports_inside_its_box(parity_loop_picture):
    record, figure, _ = parity_loop_picture
    _, _, texts, _, boxes = _boxes(figure)
    heads = sum(c.kind == "head" for c in record.components)
    ports = [box for text, box in texts if text in PORTS]
    assert heads == 7 and len(ports) == 3 * heads
    for port in ports:
        assert any(b.x0 <= port.x0 and port.x1 <= b.x1 and b.y0 <= port.y0 and port.y1 <= b.y1 for b in boxes)


def test_a_measured_edge_that_carries_no_sop_sits_on_its_sources_other_lane(parity_loop_picture):
    record = parity_loop_picture[0]
    index = next(i for i, (on, s) in enumerate(zip(record.circuit, record.structural)) if not on and not s)
    circuit = tuple(on or i == index for i, on in enumerate(record.circuit))
    figure = draw(dataclasses.replace(record, circuit=circuit))
    _, _, texts, dots, _ = _boxes(figure)
    assert [text for text, _ in texts if text.startswith(OTHER)] == [OTHER]
    assert len(dots) == len(_boxes(parity_loop_picture[1])[3]) + 1
