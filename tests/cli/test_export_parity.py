"""TransformerLens export: names and shapes, and the exported arrays reproduce our forward pass.

Parity is checked in plain numpy (`numpy_forward`, float64) on random unpadded inputs, and with
a real `HookedTransformer` when torch and transformer_lens are installed. Tolerance: output
logits/values within 1e-4 absolute and identical argmax. Compiled attention logits are
multiples of the coldness (100), so small float differences do not move the softmax.
"""

from __future__ import annotations

import dataclasses
import importlib.util

import numpy as np
import pytest
from cli_helpers import example_model

from compiler.export import ExportError, numpy_forward, to_hooked_transformer, to_transformer_lens
from compiler.model import MLPSpec

ATOL = 1e-4
CASES = [("frac_prevs", False), ("frac_prevs", True), ("sort_unique", False), ("hist", False)]


@pytest.fixture(scope="module")
def compiled():
    return {case: example_model(*case) for case in CASES}


def _random_ids(model, rng, batch=64) -> list[np.ndarray]:
    """Id arrays of two lengths, 2 and max_seq_len (BOS first, no padding)."""
    encoder = model.input_encoder
    arrays = []
    for length in (2, encoder.max_seq_len):
        ids = rng.integers(0, len(encoder.vocab), size=(batch, length + 1))
        ids[:, 0] = encoder.bos_id
        arrays.append(ids.astype(np.int32))
    return arrays


def _ours(model, ids) -> np.ndarray:
    output = np.asarray(model.run(ids).output)
    return output[..., None] if model.config.numerical_output else output


def test_names_and_shapes_follow_transformer_lens(compiled) -> None:
    model = compiled[("sort_unique", False)]
    state, cfg = to_transformer_lens(model)
    d_model, n_heads, d_head, d_mlp = cfg["d_model"], cfg["n_heads"], cfg["d_head"], cfg["d_mlp"]
    assert d_model == model.config.residual_width
    assert cfg["n_layers"] == model.config.num_layers
    assert cfg["normalization_type"] is None and cfg["act_fn"] == "relu"
    assert cfg["use_attn_scale"] is False and cfg["positional_embedding_type"] == "standard"
    assert cfg["attention_dir"] == "bidirectional" and cfg["attn_only"] is False
    expected = {
        "embed.W_E": (cfg["d_vocab"], d_model),
        "pos_embed.W_pos": (cfg["n_ctx"], d_model),
        "unembed.W_U": (d_model, cfg["d_vocab_out"]),
        "unembed.b_U": (cfg["d_vocab_out"],),
    }
    for i in range(cfg["n_layers"]):
        for name in ("W_Q", "W_K", "W_V"):
            expected[f"blocks.{i}.attn.{name}"] = (n_heads, d_model, d_head)
        for name in ("b_Q", "b_K", "b_V"):
            expected[f"blocks.{i}.attn.{name}"] = (n_heads, d_head)
        expected[f"blocks.{i}.attn.W_O"] = (n_heads, d_head, d_model)
        expected[f"blocks.{i}.attn.b_O"] = (d_model,)
        expected[f"blocks.{i}.mlp.W_in"] = (d_model, d_mlp)
        expected[f"blocks.{i}.mlp.b_in"] = (d_mlp,)
        expected[f"blocks.{i}.mlp.W_out"] = (d_mlp, d_model)
        expected[f"blocks.{i}.mlp.b_out"] = (d_model,)
    assert {name: value.shape for name, value in state.items()} == expected
    assert all(value.dtype == np.float32 for value in state.values())


def test_causal_flag_and_attention_only_models() -> None:
    from compiler import compile_rasp
    from rasp import lib, rasp

    model = compile_rasp(lib.shift_by(1, rasp.tokens), {"a", "b"}, 4, causal=True)
    state, cfg = to_transformer_lens(model)
    assert cfg["attention_dir"] == "causal"
    assert cfg["attn_only"] is True and cfg["d_mlp"] is None
    assert not any(".mlp." in name for name in state)
    rng = np.random.default_rng(1)
    for ids in _random_ids(model, rng):
        np.testing.assert_allclose(numpy_forward(state, cfg, ids), _ours(model, ids), atol=ATOL)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}{'-causal' if c[1] else ''}")
def test_numpy_forward_of_export_matches_ours(compiled, case) -> None:
    model = compiled[case]
    state, cfg = to_transformer_lens(model)
    rng = np.random.default_rng(0)
    for ids in _random_ids(model, rng):
        ours, exported = _ours(model, ids), numpy_forward(state, cfg, ids)
        np.testing.assert_allclose(exported, ours, atol=ATOL)
        if not model.config.numerical_output:
            # Where two outputs tie (sort_unique on repeated keys) the argmax is arbitrary.
            top2 = np.sort(ours, axis=-1)[..., -2:]
            clear = top2[..., 1] - top2[..., 0] > 1e-3
            np.testing.assert_array_equal(exported.argmax(-1)[clear], ours.argmax(-1)[clear])


def test_non_relu_mlp_is_refused(compiled) -> None:
    model = compiled[("hist", False)]
    layers = tuple(
        dataclasses.replace(layer, activation="square") if isinstance(layer, MLPSpec) else layer
        for layer in model.config.layers
    )
    squared = dataclasses.replace(model, config=dataclasses.replace(model.config, layers=layers))
    with pytest.raises(ExportError, match="'square' activation"):
        to_transformer_lens(squared)


_HAVE_TL = all(importlib.util.find_spec(name) for name in ("torch", "transformer_lens"))


@pytest.mark.skipif(not _HAVE_TL, reason="optional torch/transformer_lens not installed")
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}{'-causal' if c[1] else ''}")
def test_hooked_transformer_logits_match_ours(compiled, case) -> None:
    import torch

    model = compiled[case]
    hooked = to_hooked_transformer(model)
    rng = np.random.default_rng(2)
    for ids in _random_ids(model, rng):
        with torch.no_grad():
            logits = hooked(torch.tensor(ids, dtype=torch.long), return_type="logits").numpy()
        np.testing.assert_allclose(logits, _ours(model, ids), atol=ATOL)


def test_hooked_transformer_without_the_extra_says_what_is_missing(compiled) -> None:
    if _HAVE_TL:
        pytest.skip("torch and transformer_lens are installed")
    with pytest.raises(ImportError, match="torch and transformer_lens"):
        to_hooked_transformer(compiled[("hist", False)])
