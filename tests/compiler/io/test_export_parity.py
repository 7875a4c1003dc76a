"""TransformerLens export: names and shapes, and parity with the compiled forward pass.

Numpy parity (`numpy_forward`, float64) always runs. With torch and transformer-lens installed
(the `export` extra, which CI installs) every library program is compared with the real
TransformerLens model, at two sizes, plain and causal, on padded and unpadded batches, plus a
model with no layers and one with no heads: logits, every residual snapshot and every compiled
head's attention pattern. Tolerance: 1e-5 absolute (measured worst: 7.2e-7, a residual of
sort_unique at vocab 10 / length 10; logits 1.2e-7).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import warnings

import numpy as np
import pytest
from support import example_model

from compiler import compile_rasp
from compiler.examples import EXAMPLES
from compiler.io.export import (
    PAD_MASK_LOGIT,
    ExportError,
    WeightProcessingWarning,
    export_weights,
    numpy_forward,
    to_transformer_lens,
)
from compiler.model.config import MLPSpec
from rasp import lib, rasp

ATOL = 1e-5
LARGE = 10  # the second size: vocabulary of about 10 tokens, sequences of up to 10
_HAVE_TL = all(importlib.util.find_spec(name) for name in ("torch", "transformer_lens"))
needs_tl = pytest.mark.skipif(not _HAVE_TL, reason="the export extra (torch, transformer-lens) is not installed")


def _library_cases() -> list[tuple[str, int, bool]]:
    """`(example, size, causal)`: every example at its default size and at LARGE; causal too
    where the program reads only earlier positions."""
    cases = []
    for name, example in EXAMPLES.items():
        for size in (example.max_seq_len, LARGE):
            for causal in (False, True) if example.causal else (False,):
                cases.append((name, size, causal))
    return cases


def _case_id(case: tuple[str, int, bool]) -> str:
    name, size, causal = case
    return f"{name}-{size}{'-causal' if causal else ''}"


def _compile_case(case: tuple[str, int, bool]):
    name, size, causal = case
    example = EXAMPLES[name]
    vocab = example.vocab if size == example.max_seq_len else example.scaled_vocab(LARGE)
    return compile_rasp(example.build(size), set(vocab), size, causal=causal)


def _special_models() -> dict[str, object]:
    return {
        "zero-layer": compile_rasp(rasp.tokens, {"a", "b"}, 4),  # the identity: no sub-layers
        "zero-head": compile_rasp(rasp.numerical(rasp.Map(lambda x: x + 1, rasp.tokens)), {1, 2}, 4),
    }


def _batches(model, seed: int) -> dict[str, np.ndarray]:
    """An unpadded batch (every sequence full length) and a padded one (random lengths)."""
    encoder = model.input_encoder
    rng = np.random.default_rng(seed)
    n = encoder.max_seq_len

    def sequence(length: int) -> list:
        return [encoder.bos, *(encoder.vocab[i] for i in rng.integers(0, len(encoder.vocab), length))]

    # Both [12, n + 1] (the padded batch holds one full-length row), so JAX compiles once.
    lengths = [n, 1, *(int(length) for length in rng.integers(1, n + 1, 10))]
    return {
        "unpadded": encoder.encode_batch([sequence(n) for _ in range(12)]),
        "padded": encoder.encode_batch([sequence(length) for length in lengths]),
    }


def _ours(model, ids) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
    result = model.run(ids)
    output = np.asarray(result.output)
    output = output[..., None] if model.config.numerical_output else output
    return output, [np.asarray(r) for r in result.residuals], [np.asarray(a) for a in result.attention]


# -- the numpy export ---------------------------------------------------------------------------


def test_names_and_shapes_follow_transformer_lens(sort_unique_model) -> None:
    model = sort_unique_model
    exported = export_weights(model)
    state, cfg = exported.state_dict, exported.config
    d_model, n_heads, d_head, d_mlp = cfg["d_model"], cfg["n_heads"], cfg["d_head"], cfg["d_mlp"]
    assert d_model == model.config.residual_width
    assert cfg["n_layers"] == model.config.num_layers
    assert cfg["normalization_type"] is None and cfg["act_fn"] == "relu"
    assert cfg["use_attn_scale"] is False and cfg["positional_embedding_type"] == "standard"
    assert cfg["attention_dir"] == "bidirectional" and cfg["attn_only"] is False
    widest = max(head.w_q.shape[1] for layer in model.config.layers if hasattr(layer, "heads") for head in layer.heads)
    assert d_head == widest + 1 and exported.info.pad_mask_dim == widest  # one dimension masks PAD
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


def test_info_carries_labels_ids_outputs_and_real_heads(frac_prevs_literal, sort_unique_model) -> None:
    model = frac_prevs_literal  # a head-less attention sub-layer, a numerical output
    info = export_weights(model).info
    assert info.residual_labels == model.residual_labels
    assert info.bos_id == model.input_encoder.bos_id and info.pad_id == model.input_encoder.pad_id
    assert info.input_tokens[info.bos_id] == "BOS" and info.input_tokens[info.pad_id] == "PAD"
    assert info.output_values is None  # numerical: logit column 0 is the value
    assert info.real_heads == tuple(
        len(model.config.layers[a].heads) if a is not None else 0 for a, _ in info.block_sublayers
    )
    assert info.real_heads[0] == 0 and info.program_label == "frac_prevs"
    assert [stage for stage, _ in info.stages] == list(model.stage_names)
    assert info.stages[0][1] == "blocks.0.hook_resid_pre" and info.stages[-1][1].endswith("hook_resid_post")
    categorical = export_weights(sort_unique_model).info
    assert categorical.output_values == model_output_values("sort_unique")


def model_output_values(name: str) -> tuple:
    return example_model(name).output_encoder.values


def test_attention_scale_is_folded_exactly_into_w_q() -> None:
    model = example_model("sort")
    plain, scaled = export_weights(model), export_weights(model, attn_scale=2.0)
    assert scaled.config["use_attn_scale"] and scaled.config["attn_scale"] == 2.0
    for name, value in plain.state_dict.items():
        factor = 2.0 if name.endswith("attn.W_Q") else 1.0
        np.testing.assert_array_equal(scaled.state_dict[name], value * factor)  # powers of 2: exact
    ids = _batches(model, 3)["padded"]
    np.testing.assert_allclose(
        numpy_forward(scaled.state_dict, scaled.config, ids), numpy_forward(plain.state_dict, plain.config, ids), atol=1e-9
    )


def test_causal_flag_and_attention_only_models() -> None:
    model = compile_rasp(lib.shift_by(1, rasp.tokens), {"a", "b"}, 4, causal=True)
    exported = export_weights(model)
    assert exported.config["attention_dir"] == "causal"
    assert exported.config["attn_only"] is True and exported.config["d_mlp"] == 0
    assert not any(".mlp." in name for name in exported.state_dict)
    for ids in _batches(model, 1).values():
        np.testing.assert_allclose(
            numpy_forward(exported.state_dict, exported.config, ids), _ours(model, ids)[0], atol=ATOL
        )


@pytest.mark.parametrize("case", [("frac_prevs", 5, True), ("sort_unique", 5, False), ("hist", 5, False),
                                  ("sort_freq", LARGE, False)], ids=_case_id)
def test_numpy_forward_of_export_matches_ours_padded_and_unpadded(case) -> None:
    model = _compile_case(case)
    exported = export_weights(model)
    for ids in _batches(model, 0).values():
        np.testing.assert_allclose(
            numpy_forward(exported.state_dict, exported.config, ids), _ours(model, ids)[0], atol=ATOL
        )


def test_pad_keys_get_no_attention_through_the_weights(sort_unique_model) -> None:
    model = sort_unique_model
    exported = export_weights(model)
    state, dim = exported.state_dict, exported.info.pad_mask_dim
    labels = list(model.residual_labels)
    w_q, w_k = state["blocks.0.attn.W_Q"], state["blocks.0.attn.W_K"]
    assert np.all(w_q[:, labels.index("one"), dim] == 1.0)
    assert np.all(w_k[:, labels.index("tokens:PAD"), dim] == -PAD_MASK_LOGIT)
    assert np.count_nonzero(w_q[:, :, dim]) == w_q.shape[0] and np.count_nonzero(w_k[:, :, dim]) == w_k.shape[0]


def test_zero_layer_model_exports_one_empty_block() -> None:
    model = _special_models()["zero-layer"]
    exported = export_weights(model)
    assert model.config.layers == () and exported.config["n_layers"] == 1
    assert exported.info.real_heads == (0,) and exported.info.block_sublayers == ((None, None),)
    assert exported.info.stages == (("embed", "blocks.0.hook_resid_pre"),)
    assert not np.any(exported.state_dict["blocks.0.attn.W_O"])


def test_non_relu_mlp_is_refused() -> None:
    model = example_model("hist")
    layers = tuple(
        dataclasses.replace(layer, activation="square") if isinstance(layer, MLPSpec) else layer
        for layer in model.config.layers
    )
    squared = dataclasses.replace(model, config=dataclasses.replace(model.config, layers=layers))
    with pytest.raises(ExportError, match="'square' activation"):
        export_weights(squared)


# -- the real TransformerLens -------------------------------------------------------------------


def _compare_with_transformer_lens(model, seed: int, atol: float = ATOL) -> None:
    import torch

    tl_model = to_transformer_lens(model)
    info = tl_model.export_info
    for kind, ids in _batches(model, seed).items():
        if kind == "padded" and info.pad_mask_dim is None:
            continue  # an export without a PAD mask runs batches of one length
        output, residuals, attention = _ours(model, ids)
        with torch.no_grad():
            logits, cache = tl_model.run_with_cache(torch.tensor(ids, dtype=torch.long))
        np.testing.assert_allclose(logits.numpy(), output, atol=atol, err_msg=f"{kind} logits")
        for (stage, hook), residual in zip(info.stages, residuals, strict=True):
            np.testing.assert_allclose(cache[hook].numpy(), residual, atol=atol, err_msg=f"{kind} {stage}")
        patterns = iter(attention)
        for block, (attn, _) in enumerate(info.block_sublayers):
            if attn is None:
                continue
            theirs = cache[f"blocks.{block}.attn.hook_pattern"].numpy()[:, : info.real_heads[block]]
            np.testing.assert_allclose(theirs, next(patterns), atol=atol, err_msg=f"{kind} block {block} pattern")
        assert next(patterns, None) is None


@needs_tl
@pytest.mark.parametrize("case", _library_cases(), ids=_case_id)
def test_transformer_lens_equals_compiled_model(case) -> None:
    _compare_with_transformer_lens(_compile_case(case), seed=len(_case_id(case)))


@needs_tl
@pytest.mark.parametrize("name", ["zero-layer", "zero-head"])
def test_transformer_lens_handles_models_without_layers_or_heads(name) -> None:
    model = _special_models()[name]
    if name == "zero-head":
        assert all(len(layer.heads) == 0 for layer in model.config.layers if hasattr(layer, "heads"))
    _compare_with_transformer_lens(model, seed=7)


@needs_tl
def test_padded_bidirectional_batch_decodes_like_the_compiled_model(sort_unique_model) -> None:
    import torch

    model = sort_unique_model
    tl_model = to_transformer_lens(model)
    info = tl_model.export_info
    batch = [["BOS", 3, 1], ["BOS", 5, 2, 4, 1]]
    ids = torch.tensor(info.encode_batch(batch), dtype=torch.long)
    with torch.no_grad():
        logits = tl_model(ids)
    decoded = [info.decode(logits[row], len(tokens)) for row, tokens in enumerate(batch)]
    assert decoded == [["BOS", 1, 3], ["BOS", 1, 2, 4, 5]] == model.apply_batch(batch)


@needs_tl
def test_labels_and_ids_travel_with_the_model(sort_unique_model) -> None:
    model = sort_unique_model
    tl_model = to_transformer_lens(model)
    info = tl_model.export_info
    assert info.transformer_lens_version is not None
    assert info.residual_labels == model.residual_labels
    assert tl_model.cfg.model_name == "tracr-compile/sort"
    assert tl_model.cfg.d_vocab == len(info.input_tokens) and tl_model.cfg.d_vocab_out == len(info.output_values)
    assert tl_model.cfg.n_ctx == model.config.max_seq_len + 1


@needs_tl
def test_default_weight_processing_warns_and_would_change_outputs() -> None:
    import torch

    model = example_model("frac_prevs")
    ids = torch.tensor(model.input_encoder.encode_batch([["BOS", "x", "a", "x"]]), dtype=torch.long)
    tl_model = to_transformer_lens(model)
    process = "process_weights" if hasattr(type(tl_model), "process_weights") else "process_weights_"
    with torch.no_grad():
        before = tl_model(ids).numpy()
    with pytest.warns(WeightProcessingWarning, match="center_unembed=True"):
        getattr(tl_model, process)()
    with torch.no_grad():
        after = tl_model(ids).numpy()
    # Centring a one-column unembedding zeroes it: the numerical output is lost.
    assert np.abs(before).max() > 0.5 and np.all(after == 0)
    quiet = to_transformer_lens(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", WeightProcessingWarning)
        getattr(quiet, process)(center_unembed=False, center_writing_weights=False)
    with torch.no_grad():
        np.testing.assert_array_equal(quiet(ids).numpy(), before)


@needs_tl
def test_unsupported_transformer_lens_version_is_named(monkeypatch) -> None:
    import compiler.io.export as export

    monkeypatch.setattr(export, "transformer_lens_version", lambda: "2.16.1")
    with pytest.raises(ExportError, match=r"TransformerLens 2\.16\.1 is installed.*3\.x.*4\.x"):
        to_transformer_lens(example_model("hist"))


def test_without_the_extra_the_error_names_it(monkeypatch) -> None:
    import importlib.metadata

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    with pytest.raises(ImportError, match=r"tracr-compile\[export\]"):
        to_transformer_lens(example_model("hist"))


# -- models with a norm -------------------------------------------------------------------------

NORM_ATOL = 1e-4
NORM_CASES = [("sort_unique", 5, False, "layernorm"), ("frac_prevs", 5, True, "layernorm"),
              ("count_so_far", 5, False, "rmsnorm"), ("shuffle_dyck2", 5, False, "layernorm")]


def _norm_case_id(case: tuple[str, int, bool, str]) -> str:
    return f"{_case_id(case[:3])}-{case[3]}"


def _compile_norm_case(case: tuple[str, int, bool, str]):
    name, size, causal, norm = case
    example = EXAMPLES[name]
    return compile_rasp(example.build(size), set(example.vocab), size, causal=causal, norm=norm)


@pytest.mark.parametrize("case", NORM_CASES, ids=_norm_case_id)
def test_a_norm_exports_as_transformer_lens_norm_sites(case) -> None:
    """`normalization_type` LN / RMS with the gain on every coordinate of every site (ln1, ln2,
    ln_final) and zero biases; the float64 check of the export equals the compiled model."""
    model = _compile_norm_case(case)
    exported = export_weights(model)
    norm, state = model.config.norm, exported.state_dict
    assert exported.config["normalization_type"] == {"layernorm": "LN", "rmsnorm": "RMS"}[norm.kind]
    assert exported.config["eps"] == norm.eps
    sites = [name for name in state if name.endswith(".w") and ("ln" in name)]
    assert "ln_final.w" in sites and "blocks.0.ln1.w" in sites
    for name in sites:
        np.testing.assert_array_equal(state[name], np.float32(norm.scale))
        if norm.kind == "layernorm":
            assert not np.any(state[name[:-2] + ".b"])
    for kind, ids in _batches(model, 3).items():
        if kind == "padded" and exported.info.pad_mask_dim is None:
            continue  # a LayerNorm export has no PAD mask in its weights
        np.testing.assert_allclose(numpy_forward(state, exported.config, ids), _ours(model, ids)[0], atol=ATOL)


@needs_tl
@pytest.mark.parametrize("case", NORM_CASES, ids=_norm_case_id)
def test_transformer_lens_runs_the_norm_like_the_compiled_model(case) -> None:
    """Within NORM_ATOL: a sharp discretising MLP reads its normalised input (`x * scale / divisor`)
    rounded differently by torch and XLA, and its steep units (weight 256) turn one float32 ulp
    of a pre-activation near 100 (8e-6) into an output difference of that size."""
    _compare_with_transformer_lens(_compile_norm_case(case), seed=11, atol=NORM_ATOL)


def test_a_projection_of_a_normalised_model_is_refused() -> None:
    model = _compile_norm_case(NORM_CASES[0])
    with pytest.raises(ExportError, match="residual projection"):
        export_weights(model, projection=np.eye(model.config.residual_width))
