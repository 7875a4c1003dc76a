"""Pictures: PNG files of non-trivial size, one residual panel per sub-layer, labelled axes."""

from __future__ import annotations

import numpy as np
import pytest
from support import example_tokens

from compiler.cli import plots
from compiler.model.weights import head_weights

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def model(frac_prevs_literal):
    # Unoptimised: the two-layer layout (is_x MLP, then the head) these pictures are checked on.
    return frac_prevs_literal


def _image_axes(figure) -> list:
    """Panels holding a heatmap (colorbars excluded)."""
    return [ax for ax in figure.axes if ax.images and ax.get_label() != "<colorbar>"]


def _png_ok(path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert len(data) > 5000


def test_residual_picture_has_one_panel_per_layer(model, tmp_path) -> None:
    tokens = example_tokens("frac_prevs")
    figure = plots.plot_residuals(model, tokens, tmp_path / "residual.png")
    _png_ok(tmp_path / "residual.png")
    panels = _image_axes(figure)
    assert [ax.get_title() for ax in panels] == list(model.stage_names)
    labels = [tick.get_text() for tick in panels[0].get_yticklabels()]
    assert labels == list(model.residual_labels)
    assert [tick.get_text() for tick in panels[0].get_xticklabels()] == [str(t) for t in tokens]
    # Outlines mark what each sub-layer changed: nothing in the embedding panel, the new
    # frac_prevs entries (positions 1-4) in layer 1's attention panel.
    outlines = [len(ax.patches) for ax in panels]
    assert outlines[0] == 0 and outlines[1] == 0
    assert outlines[model.stage_names.index("layer 1 attn")] == 4


def test_attention_picture_has_one_panel_per_head(model, tmp_path) -> None:
    figure = plots.plot_attention(model, example_tokens("frac_prevs"), tmp_path / "attention.png")
    _png_ok(tmp_path / "attention.png")
    panels = _image_axes(figure)
    assert [ax.get_title() for ax in panels] == ["layer 1 head 0"]
    pattern = panels[0].images[0].get_array()
    np.testing.assert_allclose(np.asarray(pattern).sum(axis=1), 1.0, rtol=1e-5)


def test_head_matrices_are_labelled_and_restricted_to_nonzero(model, tmp_path) -> None:
    figure = plots.plot_head(model, 2, 0, tmp_path / "head.png")
    _png_ok(tmp_path / "head.png")
    qk, ov = _image_axes(figure)
    weights = head_weights(model, 2, 0)
    rows = [tick.get_text() for tick in qk.get_yticklabels()]
    expected = [model.residual_labels[i] for i in np.flatnonzero(np.any(weights.w_qk != 0, axis=1))]
    assert rows == expected and "one" in rows
    read = [t.get_text() for t in ov.get_yticklabels()]
    assert read == ["is_x"]  # the indicator tokens == "x"
    assert [t.get_text() for t in ov.get_xticklabels()] == ["frac_prevs"]
    assert qk.get_title().endswith("W_QK") and ov.get_title().endswith("W_OV")


def test_plot_all_writes_three_pictures(model, tmp_path) -> None:
    written = plots.plot_all(model, example_tokens("frac_prevs"), tmp_path / "frac.png")
    assert [p.name for p in written] == ["frac.png", "frac-attention.png", "frac-heads.png"]
    for path in written:
        _png_ok(path)


def test_model_without_heads_still_gets_pictures(tmp_path) -> None:
    from compiler import compile_rasp
    from rasp import rasp

    model = compile_rasp(rasp.Map(lambda x: x + 1, rasp.tokens).named("inc"), {1, 2}, 3)
    written = plots.plot_all(model, ["BOS", 1, 2], tmp_path / "inc.png")
    assert all(path.stat().st_size > 1000 for path in written)
