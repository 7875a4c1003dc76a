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


def _shown_stages(model) -> list[str]:
    """Stage names whose sub-layer holds something (empty halves of a layer get no panel)."""
    empty = plots._empty_sublayers(model)
    return [name for index, name in enumerate(model.stage_names) if index not in empty]


def test_residual_picture_has_one_panel_per_layer(model, tmp_path) -> None:
    tokens = example_tokens("frac_prevs")
    figure = plots.plot_residuals(model, tokens, tmp_path / "residual.png")
    _png_ok(tmp_path / "residual.png")
    panels = _image_axes(figure)
    assert [ax.get_title() for ax in panels] == _shown_stages(model)
    labels = [tick.get_text() for tick in panels[0].get_yticklabels()]
    assert labels == list(model.residual_labels)
    assert [tick.get_text() for tick in panels[0].get_xticklabels()] == [str(t) for t in tokens]
    # Outlines mark what each sub-layer changed: nothing in the embedding panel, the new
    # frac_prevs entries (positions 1-4) in layer 1's attention panel.
    outlines = dict(zip(_shown_stages(model), (len(ax.patches) for ax in panels)))
    assert outlines["embed"] == 0
    assert outlines["layer 1 attn"] == 4
    # Axis titles, a colour bar, a title naming the omitted empty sub-layers.
    assert panels[0].get_ylabel().startswith("residual direction")
    assert figure.get_supxlabel() == "position (input token)"
    assert any(ax.get_label() == "<colorbar>" for ax in figure.axes)
    empty = [name for name in model.stage_names if name not in _shown_stages(model)]
    assert empty and all(name in figure.get_suptitle() for name in empty)


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
    # Square cells of one size: the 1 x 1 W_OV is one cell, not a panel as large as W_QK.
    (qk_rows, qk_cols), (ov_rows, ov_cols) = (ax.images[0].get_array().shape for ax in (qk, ov))
    for ax, (rows, cols) in ((qk, (qk_rows, qk_cols)), (ov, (ov_rows, ov_cols))):
        box = ax.get_position()
        inches = (box.width * figure.get_figwidth(), box.height * figure.get_figheight())
        assert inches == pytest.approx((cols * plots.CELL, rows * plots.CELL))
    # Each matrix has a colour bar, every cell value is written at a readable size.
    assert all(any(getattr(child, "_colorbar", None) for child in ax.child_axes) for ax in (qk, ov))
    values = [t for t in qk.texts if t.get_text() not in ("",)]
    assert values and min(t.get_fontsize() for t in values) >= 5.5
    weights = head_weights(model, 2, 0)
    rows = [tick.get_text() for tick in qk.get_yticklabels()]
    expected = [model.residual_labels[i] for i in np.flatnonzero(np.any(weights.w_qk != 0, axis=1))]
    assert rows == expected and "one" in rows
    read = [t.get_text() for t in ov.get_yticklabels()]
    assert read == ["is_x"]  # the indicator tokens == "x"
    assert [t.get_text() for t in ov.get_xticklabels()] == ["frac_prevs"]
    assert qk.get_title().startswith("W_QK") and ov.get_title().startswith("W_OV")
    assert qk.get_ylabel() == "query" and qk.get_xlabel() == "key"
    assert "rows: read (value); columns: written" in ov.get_title()  # too small for axis titles
    assert any(text.get_text().startswith("layer 1 head 0") for text in figure.texts)


def test_head_panels_and_titles_do_not_overlap(tmp_path) -> None:
    from compiler import compile_rasp
    from compiler.examples import EXAMPLES

    example = EXAMPLES["sort"]
    model = compile_rasp(example.build(example.max_seq_len), example.vocab, example.max_seq_len)
    figure = plots.plot_heads(model, tmp_path / "heads.png")
    _png_ok(tmp_path / "heads.png")
    renderer = figure._get_renderer()
    boxes = [ax.get_tightbbox(renderer) for ax in _image_axes(figure)]
    boxes += [text.get_window_extent(renderer) for text in figure.texts]
    for i, first in enumerate(boxes):
        for second in boxes[i + 1 :]:
            assert not first.overlaps(second), (first, second)
    # The saved picture is the box around every drawn label (inches), so nothing is cut.
    from PIL import Image

    whole = figure.get_tightbbox(renderer).padded(0.05)
    size = Image.open(tmp_path / "heads.png").size
    assert size == pytest.approx((whole.width * plots.DEFAULT_DPI, whole.height * plots.DEFAULT_DPI), rel=0.01)


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


@pytest.mark.parametrize("suffix, signature", [(".svg", b"<?xml"), (".pdf", b"%PDF")])
def test_vector_formats_follow_the_suffix(model, tmp_path, suffix, signature) -> None:
    written = plots.plot_all(model, example_tokens("frac_prevs"), tmp_path / f"frac{suffix}")
    assert [p.suffix for p in written] == [suffix] * 3
    assert all(p.read_bytes().startswith(signature) for p in written)


def test_dpi_sets_the_png_size_and_bad_suffixes_are_refused(model, tmp_path) -> None:
    from PIL import Image

    tokens = example_tokens("frac_prevs")
    plots.plot_residuals(model, tokens, tmp_path / "low.png", dpi=60)
    plots.plot_residuals(model, tokens, tmp_path / "high.png", dpi=120)
    low, high = (Image.open(tmp_path / name).size for name in ("low.png", "high.png"))
    assert high[0] == pytest.approx(2 * low[0], rel=0.05)
    with pytest.raises(ValueError, match=r"\.png, \.svg, \.pdf"):
        plots.plot_all(model, tokens, tmp_path / "frac.jpeg")


def test_cli_plot_takes_vector_formats_and_dpi(tmp_path, capsys) -> None:
    from compiler.cli.command_line import main

    assert main(["--example", "frac_prevs", "--plot", str(tmp_path / "frac.jpg")]) == 2
    assert ".png, .svg or .pdf" in capsys.readouterr().err
    assert main(["--example", "frac_prevs", "--plot", str(tmp_path / "frac.png"), "--dpi", "0"]) == 2
    assert main(["--example", "frac_prevs", "--plot", str(tmp_path / "frac.svg"), "--dpi", "80"]) == 0
    assert (tmp_path / "frac-heads.svg").read_bytes().startswith(b"<?xml")
    capsys.readouterr()
    assert main(["compile", "--help"]) == 0
    assert ".png, .svg or .pdf" in capsys.readouterr().out
