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

from compiler.io.export import ExportRouteWarning, to_transformer_lens
from compression.analytic import (
    packed_projection,
    packed_width,
    residual_structure,
)

ATOL = 1e-5


def test_saelens_trains_on_the_compressed_export(reverse_4_model) -> None:
    import datasets
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
    cfg = sae_lens.LanguageModelSAERunnerConfig(
        sae=sae_lens.StandardTrainingSAEConfig(d_in=d, d_sae=4 * d, l1_coefficient=1e-3),
        model_name=tl_model.cfg.model_name,
        hook_name=hook,
        is_dataset_tokenized=True,
        streaming=False,
        context_size=ids.shape[1],
        prepend_bos=False,  # the ids start with BOS already
        training_tokens=640,  # 16 steps of 40 tokens
        train_batch_size_tokens=40,
        store_batch_size_prompts=16,
        n_batches_in_buffer=16,
        n_batches_for_norm_estimate=2,
        device="cpu",
        output_path=None,
        checkpoint_path=None,
        logger=sae_lens.LoggingConfig(log_to_wandb=False),
        verbose=False,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # SAELens: 256 prompts are fewer than 640 tokens need
        runner = sae_lens.LanguageModelSAETrainingRunner(
            cfg, override_dataset=datasets.Dataset.from_dict({"input_ids": ids.tolist()}), override_model=tl_model
        )
        activations = runner.activations_store.get_activations(torch.tensor(ids))  # [B, T, d]
        ours = model.forward(model.params, ids, projection=w)
        np.testing.assert_allclose(info.decompress(activations), np.asarray(ours.residuals[-1]), atol=ATOL)
        flat = activations.reshape(-1, d)
        with torch.no_grad():
            before = float(((runner.sae(flat) - flat) ** 2).mean())
        sae = runner.run()
        with torch.no_grad():
            after = float(((sae(flat) - flat) ** 2).mean())
    assert np.isfinite(after) and after < before
