"""SAELens trains on a compressed TransformerLens export.

SAELens 6 requires transformer-lens < 4, so this runs where the `sae` extra is installed (CI
installs every extra, `.[all]`, with TransformerLens 3.9; docs/export.md, "SAELens"); elsewhere it
is skipped with that reason. What it checks: the activations
SAELens' own `ActivationsStore` reads from the export equal the compiled model's
`forward(..., projection=W)` residual stream (after `r @ W.T`) within 1e-5 on all 256
full-length inputs of reverse 4/4, and a few SAELens training steps run and lower the
reconstruction error.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

sae_lens = pytest.importorskip(
    "sae_lens", reason="SAELens is not installed (the sae extra, or every extra: pip install -e '.[all]')"
)

from support import saelens_error_before_and_after, saelens_training

from compiler.io.export import ExportRouteWarning, to_transformer_lens
from compression.analytic import (
    packed_projection,
    packed_width,
    residual_structure,
)

ATOL = 1e-5


def test_saelens_trains_on_the_compressed_export(reverse_4_model) -> None:
    import torch

    model = reverse_4_model
    structure = residual_structure(model)
    w = packed_projection(structure, packed_width(structure))
    with pytest.warns(ExportRouteWarning, match="HookedTransformer"):
        tl_model = to_transformer_lens(model, projection=w)
    info = tl_model.export_info
    assert info.route.endswith("HookedTransformer") and tl_model.cfg.d_model == w.shape[1]
    ids = model.input_encoder.encode_batch([["BOS", *xs] for xs in itertools.product("abcd", repeat=4)])
    d, hook = tl_model.cfg.d_model, info.stages[-1][1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # SAELens: 256 prompts are fewer than 640 tokens need
        runner = saelens_training(ids, d, 4 * d, hook, override_model=tl_model, model_name=tl_model.cfg.model_name)
        activations = runner.activations_store.get_activations(torch.tensor(ids))  # [B, T, d]
        ours = model.forward(model.params, ids, projection=w)
        np.testing.assert_allclose(info.decompress(activations), np.asarray(ours.residuals[-1]), atol=ATOL)
        before, after = saelens_error_before_and_after(runner, activations.reshape(-1, d))
    assert np.isfinite(after) and after < before
