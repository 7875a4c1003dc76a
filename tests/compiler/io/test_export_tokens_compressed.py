"""The export as a researcher uses it: tokens, compressed models, decoded outputs, padded heads.

Numpy checks (`export_weights`, `numpy_forward`, `ExportInfo`) always run. With the export extra
(TransformerLens 4.x alone, 3.9 beside SAELens and auto-circuit as in CI's `.[all]`, see
docs/export.md) the same claims are checked on the real TransformerLens model:
the tokenizer, the compressed export (`projection=W`) against the compiled model's
`forward(..., projection=W)` on all 340 inputs of reverse at 4 tokens / length 4, decoded
outputs (shapes, denormals, several programs), `d_mlp` of attention-only models, and a
TransformerLens patching table with its padded head dropped.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import warnings

import numpy as np
import pytest

from compiler import InvalidInputError, compile_rasp
from compiler.io.export import ExportError, ExportRouteWarning, export_weights, numpy_forward, to_transformer_lens
from compiler.io.export_info import FLOAT32_TINY
from compression.analytic import packed_projection, packed_width, residual_structure
from rasp import lib, rasp

_HAVE_TL = all(importlib.util.find_spec(name) for name in ("torch", "transformer_lens"))
needs_tl = pytest.mark.skipif(not _HAVE_TL, reason="the export extra (torch, transformer-lens) is not installed")
TOKENS = ("a", "b", "c", "d")


def all_batches(model) -> list[list[list]]:
    """Every input of `model` (4 tokens, length 4: 340), one batch per length."""
    n = model.config.max_seq_len
    return [[["BOS", *xs] for xs in itertools.product(TOKENS, repeat=length)] for length in range(1, n + 1)]


def random_projection(width: int, d: int, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).normal(size=(width, d)) / np.sqrt(d)).astype(np.float32)


def packed(model) -> np.ndarray:
    structure = residual_structure(model)
    return packed_projection(structure, packed_width(structure))


def _tl(model, **kwargs):
    """`to_transformer_lens` without the 3.x route's warning (checked in its own test)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExportRouteWarning)
        return to_transformer_lens(model, **kwargs)


@pytest.fixture(scope="module")
def reverse_tl(reverse_4_model):
    return _tl(reverse_4_model)


@pytest.fixture(scope="module")
def multi_model():
    """Two programs in one model: a categorical and a numerical output."""
    return compile_rasp([lib.make_hist(), lib.make_frac_prevs(rasp.tokens == "a")], set(TOKENS), 4)


# -- numpy: the compressed weights --------------------------------------------------------------


@pytest.fixture(scope="module")
def compressed_reference(reverse_4_model):
    """The packed projection of reverse 4/4 and the compiled model's compressed forward pass on
    all 340 inputs, one padded batch (JAX masks PAD keys by id; one compilation)."""
    model = reverse_4_model
    w = packed(model)
    batches = all_batches(model)
    ids = model.input_encoder.encode_batch([tokens for batch in batches for tokens in batch])
    result = model.forward(model.params, ids, projection=w)
    rows, start = [], 0
    for batch in batches:  # the rows of each length
        rows.append(slice(start, start + len(batch)))
        start += len(batch)
    return w, ids, result, rows


def test_compressed_export_computes_the_compressed_model(reverse_4_model, compressed_reference) -> None:
    model = reverse_4_model
    w, ids, result, rows = compressed_reference
    exported = export_weights(model, projection=w)
    assert exported.config["d_model"] == w.shape[1] < model.config.residual_width
    assert exported.state_dict["embed.W_E"].shape[1] == w.shape[1]
    assert exported.info.compressed and exported.info.pad_mask_dim is None  # tokens:PAD is unread
    for part in rows:
        unpadded = ids[part][:, : int((ids[part][0] != model.input_encoder.pad_id).sum())]
        theirs = numpy_forward(exported.state_dict, exported.config, unpadded)
        np.testing.assert_allclose(theirs, np.asarray(result.output[part])[:, : unpadded.shape[1]], atol=1e-5)


def test_identity_projection_gives_the_plain_export(sort_unique_model) -> None:
    width = sort_unique_model.config.residual_width
    plain = export_weights(sort_unique_model)
    folded = export_weights(sort_unique_model, projection=np.eye(width))
    assert folded.info.pad_mask_dim == plain.info.pad_mask_dim  # one and PAD keep their own axes
    for name, value in plain.state_dict.items():
        np.testing.assert_array_equal(folded.state_dict[name], value, err_msg=name)


def test_pad_mask_survives_a_projection_that_keeps_one_and_pad_on_their_own_axes(sort_unique_model) -> None:
    model = sort_unique_model
    labels = list(model.residual_labels)
    keep = [labels.index("one"), labels.index("tokens:PAD")]
    w = np.zeros((len(labels), 14), np.float32)
    w[keep, [0, 1]] = 1.0
    rest = [i for i in range(len(labels)) if i not in keep]
    w[rest, 2:] = random_projection(len(rest), 12, seed=2)
    exported = export_weights(model, projection=w)
    assert exported.info.pad_mask_dim is not None
    batch = [["BOS", 3, 1], ["BOS", 5, 2, 4, 1], ["BOS", 2]]
    ids = exported.info.encode_batch(batch)  # padded: allowed, PAD keys are masked exactly
    ours = np.asarray(model.forward(model.params, ids, projection=w).output)
    np.testing.assert_allclose(numpy_forward(exported.state_dict, exported.config, ids), ours, rtol=1e-4, atol=1e-4)


def test_unmasked_export_refuses_padded_batches_and_bad_projections(reverse_4_model) -> None:
    model = reverse_4_model
    info = export_weights(model, projection=random_projection(model.config.residual_width, 9)).info
    with pytest.raises(ExportError, match="different lengths cannot share a batch"):
        info.encode_batch([["BOS", "a"], ["BOS", "a", "b"]])
    assert info.encode_batch([["BOS", "a"], ["BOS", "b"]]).shape == (2, 2)
    width = model.config.residual_width
    with pytest.raises(ExportError, match=rf"\[D, d\] matrix with D = {width}.*got shape \(16, 4\)"):
        export_weights(model, projection=np.ones((16, 4)))


# -- numpy: outputs, heads, sizes ---------------------------------------------------------------


def test_outputs_have_the_compiled_shape_and_flush_denormals(frac_prevs_literal) -> None:
    info = export_weights(frac_prevs_literal).info
    logits = np.array([[[0.5], [FLOAT32_TINY / 4], [-3e-44]]], np.float32)  # [B, T, 1]
    outputs = info.outputs(logits)
    assert outputs.shape == (1, 3) and outputs.tolist() == [[0.5, 0.0, 0.0]]
    assert info.decode(logits[0]) == ["BOS", 0.0, 0.0]


def test_padded_heads_are_marked_and_dropped(reverse_4_model) -> None:
    info = export_weights(reverse_4_model).info
    assert info.n_heads == 1 and info.real_heads == (1, 0, 1) and info.padded_heads == ((1, 0),)
    table = np.arange(3.0).reshape(3, 1)  # [n_layers, n_heads], as TL's head patching returns
    assert info.real_head_results(table) == {(0, 0): 0.0, (2, 0): 2.0}
    by_position = np.zeros((3, 5, 1))  # [n_layers, pos, n_heads]
    assert set(info.real_head_results(by_position, head_axis=2)) == {(0, 0), (2, 0)}
    with pytest.raises(ValueError, match=r"heads \(1\) on axis 1, got a result of shape \(3, 2\)"):
        info.real_head_results(np.zeros((3, 2)))


def test_attention_only_models_have_d_mlp_zero() -> None:
    model = compile_rasp(lib.shift_by(1, rasp.tokens), {"a", "b"}, 4)
    exported = export_weights(model)
    assert exported.config["attn_only"] is True and exported.config["d_mlp"] == 0


def test_several_programs_decode_to_a_dict(multi_model) -> None:
    model = multi_model
    exported = export_weights(model)
    info = exported.info
    batch = [["BOS", "a", "b", "a"], ["BOS", "c"]]
    logits = numpy_forward(exported.state_dict, exported.config, info.encode_batch(batch))
    assert info.decode_batch(logits, batch) == model.apply_batch(batch)
    assert list(info.output_columns) == list(model.output_columns)
    assert info.output_values[-1] is None  # the numerical program's column


# -- the real TransformerLens -------------------------------------------------------------------


@needs_tl
def test_tokenizer_gives_strings_and_string_inputs(reverse_4_model, reverse_tl) -> None:
    from transformers import PreTrainedTokenizerFast

    tl_model, info = reverse_tl, reverse_tl.export_info
    assert isinstance(tl_model.tokenizer, PreTrainedTokenizerFast)
    assert info.route is not None and info.route.startswith(f"TransformerLens {info.transformer_lens_version}")
    ids = tl_model.to_tokens("a b c")
    assert ids.tolist() == [reverse_4_model.input_encoder.encode(["BOS", "a", "b", "c"])]
    assert tl_model.to_str_tokens(ids[0]) == ["BOS", "a", "b", "c"]
    assert tl_model.to_str_tokens("d a") == ["BOS", "d", "a"]
    strings = ["a b c", "d"]
    logits = tl_model(strings)  # padded with PAD by the tokenizer, masked by the weights
    assert info.decode_batch(logits, tl_model.to_tokens(strings)) == reverse_4_model.apply_batch(
        [["BOS", "a", "b", "c"], ["BOS", "d"]]
    )
    with pytest.raises(InvalidInputError, match=r"the word 'e' in 'a e' is not a token"):
        tl_model.to_tokens("a e")


@needs_tl
def test_compressed_transformer_lens_decodes_like_jax_on_every_input(reverse_4_model, compressed_reference) -> None:
    import torch

    model = reverse_4_model
    w, ids, result, rows = compressed_reference
    tl_model = _tl(model, projection=w)
    info = tl_model.export_info
    assert tl_model.cfg.d_model == w.shape[1] < model.config.residual_width
    for part in rows:  # one batch per length: this export cannot mask PAD keys
        length = int((ids[part][0] != info.pad_id).sum())
        with torch.no_grad():
            logits, cache = tl_model.run_with_cache(torch.tensor(ids[part][:, :length], dtype=torch.long))
        ours = np.asarray(result.output[part])[:, :length]
        np.testing.assert_allclose(info.outputs(logits), ours, atol=1e-5)
        for (stage, hook), residual in zip(info.stages, result.residuals, strict=True):
            expected = np.asarray(residual[part])[:, :length]
            np.testing.assert_allclose(info.decompress(cache[hook]), expected, atol=1e-5, err_msg=stage)
        assert info.decode_batch(logits) == [model.output_encoder.decode(row) for row in ours]


@needs_tl
def test_attention_only_transformer_lens_model_says_d_mlp_zero() -> None:
    import torch

    model = compile_rasp(lib.shift_by(1, rasp.tokens), {"a", "b"}, 4)
    tl_model = _tl(model)
    assert tl_model.cfg.d_mlp == 0 and tl_model.cfg.attn_only
    batch = [["BOS", "a", "b", "b"]]
    with torch.no_grad():
        logits = tl_model(torch.tensor(model.input_encoder.encode_batch(batch)))
    assert tl_model.export_info.decode_batch(logits, batch) == model.apply_batch(batch)


@needs_tl
def test_multi_output_decoding_equals_jax(multi_model) -> None:
    import torch

    model, batch = multi_model, [["BOS", "a", "b", "a"], ["BOS", "c"]]
    tl_model = _tl(model)
    info = tl_model.export_info
    ids = info.encode_batch(batch)
    with torch.no_grad():
        logits = tl_model(torch.tensor(ids))
    np.testing.assert_array_equal(info.outputs(logits), np.asarray(model.run(ids).output))
    assert info.decode_batch(logits, batch) == model.apply_batch(batch)


@needs_tl
def test_patching_table_drops_the_padded_head(reverse_tl) -> None:
    import torch
    from transformer_lens import patching

    tl_model, info = reverse_tl, reverse_tl.export_info
    clean = torch.tensor(info.encode_batch([["BOS", "a", "b", "c", "d"]]))
    corrupt = torch.tensor(info.encode_batch([["BOS", "d", "c", "b", "a"]]))
    _, clean_cache = tl_model.run_with_cache(clean)
    column = info.output_values.index("a")

    def metric(logits):
        return logits[0, 4, column]  # position 4 decodes 'a' on the clean input

    table = patching.get_act_patch_attn_head_out_all_pos(tl_model, corrupt, clean_cache, metric).detach()
    assert tuple(table.shape) == (3, 1)
    effects = info.real_head_results(table)
    assert set(effects) == {(0, 0), (2, 0)}  # block 1's head is padding
    with torch.no_grad():
        unpatched = float(metric(tl_model(corrupt)))
    assert float(table[1, 0]) == pytest.approx(unpatched)  # the zero head does nothing
    assert float(effects[(2, 0)]) == pytest.approx(1.0, abs=1e-5)  # the copying head carries the answer


@needs_tl
def test_tokens_that_print_alike_are_told_apart_by_repr() -> None:
    from compiler.io.hf_tokenizer import build_tokenizer, token_texts
    from compiler.model.encoders import InputEncoder

    encoder = InputEncoder(vocab=(1, "1", "x"), bos="BOS", pad="PAD", max_seq_len=3)
    assert token_texts(encoder) == ("1", "'1'", "'x'", "'BOS'", "'PAD'")
    tokenizer = build_tokenizer(encoder)
    assert tokenizer("1 '1'")["input_ids"] == [encoder.bos_id, 0, 1]
    assert tokenizer(["1", "'x' 1"], padding=True)["input_ids"] == [[3, 0, 4], [3, 2, 0]]
    assert tokenizer.batch_decode([[3, 1, 4]]) == ["'BOS' '1' 'PAD'"]


@needs_tl
def test_tokens_no_text_tells_apart_are_refused() -> None:
    from compiler.io.hf_tokenizer import token_texts
    from compiler.model.encoders import InputEncoder

    class Same:
        def __repr__(self) -> str:
            return "same"

    encoder = InputEncoder(vocab=(Same(), Same()), bos="BOS", pad="PAD", max_seq_len=2)
    with pytest.raises(ExportError, match="share the text 'same' under both str and repr"):
        token_texts(encoder)


def test_encode_with_mask_is_refused_where_the_mask_would_be_ignored(reverse_4_model) -> None:
    model = reverse_4_model
    info = export_weights(model, projection=random_projection(model.config.residual_width, 9)).info
    batch = [["BOS", "a", "b"], ["BOS", "c"]]
    ids, mask = info.encode_with_mask(batch)
    assert mask.tolist() == [[1, 1, 1], [1, 1, 0]] and ids[1, 2] == info.pad_id
    on_3 = dataclasses.replace(info, transformer_lens_version="3.9.0")
    with pytest.raises(ExportError, match=r"TransformerLens 3\.9\.0 ignores attention_mask in bidirectional"):
        on_3.encode_with_mask(batch)
    on_3.encode_with_mask([["BOS", "a"], ["BOS", "b"]])  # nothing padded: nothing to mask


@needs_tl
def test_compressed_padded_batch_with_attention_mask_equals_jax(sort_unique_model) -> None:
    import torch

    from compression.analytic import random_projection as protected_random_projection

    model = sort_unique_model  # sorting reads every key: unmasked PAD keys change its outputs
    w = protected_random_projection(residual_structure(model), len(residual_structure(model).protected) + 8)
    tl_model = _tl(model, projection=w)
    info = tl_model.export_info
    assert info.pad_mask_dim is None
    batch = [["BOS", 3, 1, 5, 2, 4], ["BOS", 2], ["BOS", 5, 1, 3]]
    if info.transformer_lens_version.startswith("3."):
        with pytest.raises(ExportError, match="ignores attention_mask"):
            info.encode_with_mask(batch)
        return
    ids, mask = info.encode_with_mask(batch)
    with torch.no_grad():
        logits = tl_model(torch.tensor(ids), attention_mask=torch.tensor(mask))
    real = mask.astype(bool)
    ours = np.asarray(model.forward(model.params, ids, projection=w).output)
    np.testing.assert_allclose(info.outputs(logits)[real], ours[real], atol=1e-5)
