"""`folded_model`: a residual projection folded into the weights, an ordinary model of the
compressed width.

Without a norm the folded model computes `forward(..., projection=W)` (outputs, and every
residual snapshot read back through `Wᵀ` as the projected pass reports it, within 1e-5). With a
norm the projection covers the compiled coordinates only (of the same program object); the
folded stream has mean zero at every position (within 1e-3 of an anchor in the hundreds: float32
rounding), each norm's factor stays within the recomputed spread (plus
1e-6 of float32 rounding), and the outputs decode as RASP's on random inputs.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import random_inputs

from compiler import compile_rasp
from compiler.errors import CompilerError
from compiler.model.agree import same_value
from compiler.model.folding import folded_model
from compiler.model.norm import read_factor
from compression.analytic import packed_projection, packed_width, residual_structure
from rasp import lib, rasp


def _program():
    return lib.make_sort_unique(rasp.tokens, rasp.tokens)


def test_a_folded_model_computes_the_projected_forward_pass() -> None:
    model = compile_rasp(_program(), {1, 2, 3, 4}, 4)
    width = model.config.residual_width
    w = np.random.default_rng(0).normal(size=(width, width - 3)).astype(np.float32) / np.sqrt(width)
    folded = folded_model(model, w)
    assert folded.config.residual_width == width - 3
    batch = [["BOS", *xs] for xs in random_inputs([1, 2, 3, 4], 4, 40, seed=2)]
    ids = model.input_encoder.encode_batch(batch)
    ours = folded.forward(folded.params, ids)
    theirs = model.forward(model.params, ids, projection=w)
    np.testing.assert_allclose(np.asarray(ours.output), np.asarray(theirs.output), atol=1e-5)
    for a, b in zip(ours.residuals, theirs.residuals, strict=True):
        np.testing.assert_allclose(np.asarray(a) @ w.T, np.asarray(b), atol=1e-5)


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
def test_a_folded_normalised_model_keeps_its_norm_a_known_scale(norm: str) -> None:
    program = _program()
    plain = compile_rasp(program, {1, 2, 3, 4}, 4)
    model = compile_rasp(program, {1, 2, 3, 4}, 4, norm=norm)
    structure = residual_structure(plain)
    w = packed_projection(structure, packed_width(structure))
    folded = folded_model(model, w)
    extra = 3 if norm == "layernorm" else 1
    assert folded.config.residual_width == w.shape[1] + extra < model.config.residual_width
    spec = folded.config.norm
    assert spec is not None and spec.kind == norm and spec.spread <= 1e-5
    batch = [["BOS", *xs] for xs in random_inputs([1, 2, 3, 4], 4, 60, seed=3)]
    ids = model.input_encoder.encode_batch(batch)
    out = folded.forward(folded.params, ids)
    real = ids != model.input_encoder.pad_id
    for stream in out.residuals:
        s = np.asarray(stream, np.float64)[real]
        if norm == "layernorm":
            assert np.abs(s.mean(axis=-1)).max() <= 1e-3
        assert np.abs(read_factor(spec, s) - 1).max() <= spec.spread + 1e-6
    decoded = folded.apply_batch(batch)
    for row, tokens in zip(decoded, batch, strict=True):
        assert all(same_value(g, e) for g, e in zip(row[1:], rasp.evaluate(program, tokens[1:]), strict=True))


def test_a_projection_of_the_wrong_shape_is_refused_with_the_width() -> None:
    model = compile_rasp(_program(), {1, 2, 3, 4}, 4, norm="layernorm")
    compiled = model.config.residual_width - 3
    with pytest.raises(CompilerError, match=f"has {compiled} rows"):
        folded_model(model, np.zeros((model.config.residual_width, 4)))
    plain = compile_rasp(_program(), {1, 2, 3, 4}, 4)
    with pytest.raises(CompilerError, match="not finite"):
        folded_model(plain, np.full((plain.config.residual_width, 4), np.nan))
