"""Hugging Face export: an ordinary GPT-2 checkpoint whose argmax tokens are the program's outputs.

Every check runs the checkpoint in a separate Python process that imports transformers and torch
and nothing of this project (`compiler.io.huggingface.run_in_fresh_process`, which also reports
any project module that process imported: none). Default: three programs on every input at 5/5
(a sort, a numerical mean read through the `<value>` logit, a loop), a causal compile and a
10/10 program on 200 random inputs, and the same three compressed (a packed projection folded
in, `projection=W`) on 300 random inputs each; categorical outputs must decode to the same tokens, numbers
agree within the agree rule (1e-3 relative). `slow`: every library program on every input at
5/5 (2,000 random ones for the one space above 10^5 inputs, addition_loop's) and on 500 random
inputs at 10/10.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from support import saelens_error_before_and_after, saelens_training

from compiler import compile_rasp
from compiler.errors import CausalSemanticsWarning
from compiler.examples import CATALOGUE
from compiler.io.export_info import ExportError
from compiler.io.huggingface import (
    NONE_TOKEN,
    VALUE_TOKEN,
    expected_outputs,
    input_texts,
    read_config,
    run_in_fresh_process,
    to_huggingface,
)
from compiler.model.agree import AGREE_TOLERANCE, same_value
from compiler.model.folding import folded_model
from compression.analytic import packed_projection, packed_width, residual_structure
from compression.learned.sampling import distinct_inputs, enumerate_inputs
from compression.task import input_space_of
from rasp import lib, rasp

pytest.importorskip("transformers")
pytest.importorskip("torch")


def _case(name: str, size: int, causal: bool = False):
    example = CATALOGUE[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalSemanticsWarning)
        return compile_rasp(example.build(size), set(example.scaled_vocab(size)), size, causal=causal, norm="layernorm")


def _inputs(model, count: int | None) -> list[list]:
    """Every input (`count` None; 2,000 random ones where the space holds more than 10^5), or
    `count` random ones."""
    space = input_space_of(model)
    if count is None and space.size() > 100_000:
        count = 2_000
    ids = enumerate_inputs(space) if count is None else distinct_inputs(space, count, 0)
    return [space.decode(row) for row in ids]


def _check_all(cases, tmp_path, projections=None) -> None:
    """Export each `(label, model, inputs)` (compressed by `projections[label]` where given),
    run all in one fresh process, compare with the (folded) model."""
    jobs, expected = [], []
    for label, model, inputs in cases:
        w = (projections or {}).get(label)
        export = to_huggingface(model, tmp_path / label, projection=w)
        value = VALUE_TOKEN if model.config.numerical_output else None
        jobs.append((export.folder, input_texts(export, inputs, model), value))
        reference = model if w is None else folded_model(model, w)
        expected.append((label, expected_outputs(export, reference, inputs), value))
    outputs, modules = run_in_fresh_process(jobs)
    assert modules == []
    for (label, want, value), got in zip(expected, outputs):
        assert len(got) == len(want)
        if value is None:
            wrong = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
            assert not wrong, (label, got[wrong[0]], want[wrong[0]])
        else:
            errors = [abs(g - w) / max(1.0, abs(w)) for gs, ws in zip(got, want) for g, w in zip(gs, ws)]
            assert max(errors) <= AGREE_TOLERANCE, (label, max(errors))


def test_checkpoints_decode_like_the_compiled_models(tmp_path):
    cases = []
    for name in ("sort_unique", "frac_prevs", "parity_loop"):
        model = _case(name, 5)
        cases.append((name, model, _inputs(model, None)))
    causal = _case("count_so_far", 5, causal=True)
    cases.append(("count_so_far-causal", causal, _inputs(causal, 300)))
    large = _case("sort", 10)
    cases.append(("sort-10", large, _inputs(large, 200)))
    _check_all(cases, tmp_path)


def test_compressed_checkpoints_decode_like_rasp(tmp_path):
    """A packed projection of the LayerNorm model's compiled coordinates, folded into it: the
    folded model is right on 300 random inputs at 5/5, and the checkpoint, narrower than the
    uncompressed one, decodes as it does (every library program: `python benchmarks/norm.py
    --huggingface --packed`)."""
    cases, projections = [], {}
    for name in ("sort_unique", "frac_prevs", "parity_loop"):
        model = _case(name, 5)
        structure = residual_structure(model)
        w = packed_projection(structure, packed_width(structure))
        inputs = _inputs(model, 300)
        folded = folded_model(model, w)
        assert folded.config.residual_width == w.shape[1] + 3 < model.config.residual_width
        decoded = folded.apply_batch([[model.input_encoder.bos, *tokens] for tokens in inputs])
        wrong = [i for i, (row, tokens) in enumerate(zip(decoded, inputs))
                 if not all(same_value(got, want) for got, want in zip(row[1:], rasp.evaluate(model.program, tokens)))]
        assert not wrong, (name, inputs[wrong[0]])
        cases.append((name, model, inputs))
        projections[name] = w
    _check_all(cases, tmp_path, projections)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CATALOGUE))
def test_every_library_program_exports_exactly(name, tmp_path):
    small, large = _case(name, 5), _case(name, 10)
    _check_all([(f"{name}-5", small, _inputs(small, None)), (f"{name}-10", large, _inputs(large, 500))], tmp_path)


def test_the_checkpoint_is_a_plain_gpt2_with_one_vocabulary(tmp_path):
    """Standard GPT-2 files and names; input tokens keep the compiled ids, output values follow,
    `<none>` is last; the config records the norm and the causal flag."""
    model = compile_rasp(lib.make_hist(), {"a", "b", "c"}, 4, norm="layernorm")
    export = to_huggingface(model, tmp_path / "hist")
    files = sorted(path.name for path in export.folder.iterdir())
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "README.md"} <= set(files)
    config = json.loads((export.folder / "config.json").read_text())
    assert config["model_type"] == "gpt2" and config["architectures"] == ["GPT2LMHeadModel"]
    assert config["is_causal"] is False and config["scale_attn_weights"] is True
    assert export.head_dim in (4, 16, 64, 256)  # a power of 4: sqrt(head_dim) is exact
    assert config["activation_function"] == "relu" and config["tie_word_embeddings"] is False
    assert export.tokens[:5] == ("a", "b", "c", "BOS", "PAD") and export.tokens[-1] == NONE_TOKEN
    assert export.tokens[5:-1] == ("0", "1", "2", "3", "4")  # hist's output values (its value set), no input token
    assert read_config(export.folder)["norm_spread"] <= 1e-5
    assert config["n_embd"] == export.n_head * export.head_dim >= model.config.residual_width
    import safetensors.numpy

    tensors = safetensors.numpy.load_file(str(export.folder / "model.safetensors"))
    assert tensors["lm_head.weight"].shape == (len(export.tokens), export.n_embd)
    assert tensors["transformer.h.0.attn.c_attn.weight"].shape == (export.n_embd, 3 * export.n_embd)
    np.testing.assert_array_equal(tensors["transformer.ln_f.bias"], 0)
    assert "BOS" in (export.folder / "README.md").read_text()


def test_an_earlier_export_is_replaced_whole_and_bad_folders_are_refused(tmp_path):
    model = compile_rasp(lib.make_length(), {1, 2}, 3, norm="layernorm")
    first = to_huggingface(model, tmp_path / "length")
    again = to_huggingface(compile_rasp(lib.make_hist(), {1, 2}, 3, norm="layernorm"), tmp_path / "length")
    assert again.folder == first.folder and "hist" in read_config(again.folder)["program"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["length"]  # no staging or old folder left
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="holds other files"):
        to_huggingface(model, tmp_path / "other")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ExportError, match="is a file"):
        to_huggingface(model, tmp_path / "file")
    with pytest.raises(ExportError, match="parent"):
        to_huggingface(model, tmp_path / "missing" / "model")


def test_models_a_gpt2_cannot_hold_are_refused_with_the_reason(tmp_path):
    plain = compile_rasp(lib.make_length(), {1, 2}, 3)
    with pytest.raises(ExportError, match="norm='layernorm'"):
        to_huggingface(plain, tmp_path / "a")
    rms = compile_rasp(lib.make_length(), {1, 2}, 3, norm="rmsnorm")
    with pytest.raises(ExportError, match="has a rmsnorm"):
        to_huggingface(rms, tmp_path / "b")
    both = compile_rasp([lib.make_length(), lib.make_hist()], {1, 2}, 3, norm="layernorm")
    with pytest.raises(ExportError, match="several programs"):
        to_huggingface(both, tmp_path / "c")
    clash = compile_rasp(rasp.Map(lambda t: t, rasp.tokens), {"<none>", "x"}, 3, norm="layernorm")
    with pytest.raises(ExportError, match="rename it"):
        to_huggingface(clash, tmp_path / "d")
    assert not any(tmp_path.iterdir())  # refused before anything was written


def _tokens(tokenizer, logits) -> list[str]:
    return tokenizer.convert_ids_to_tokens(logits[0].argmax(-1).tolist())


def _transformer_lens_model(folder):
    """The checkpoint in whichever TransformerLens line is installed, as docs/huggingface.md
    loads it: 4.x boots it (`TransformerBridge.boot_transformers`; its GPT-2 adapter ignores
    `is_causal: false`, so a bidirectional program's attention bridges are told); 3.x, which
    loads only models it knows by name, builds a `HookedTransformer` from the folder's config
    and converts the GPT-2 weights (with the MLP width and the direction the config states)."""
    from importlib.metadata import version

    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    causal = AutoConfig.from_pretrained(folder).is_causal
    if version("transformer-lens").startswith("4."):
        from transformer_lens import TransformerBridge
        from transformer_lens.model_bridge.generalized_components.attention import AttentionBridge

        bridge = TransformerBridge.boot_transformers(str(folder), device="cpu")
        for module in bridge.modules():
            if not causal and isinstance(module, AttentionBridge):
                object.__setattr__(module, "is_causal", False)
        return bridge
    from transformer_lens import HookedTransformer
    from transformer_lens.loading_from_pretrained import get_pretrained_model_config
    from transformer_lens.pretrained.weight_conversions import convert_gpt2_weights

    hf_model = AutoModelForCausalLM.from_pretrained(folder)
    cfg = get_pretrained_model_config(str(folder))
    cfg.d_mlp, cfg.attention_dir = hf_model.config.n_inner, "causal" if causal else "bidirectional"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.9 points to 4.x's bridge
        hooked = HookedTransformer(cfg, AutoTokenizer.from_pretrained(folder))
    hooked.load_and_process_state_dict(convert_gpt2_weights(hf_model, cfg), fold_ln=False,
                                       center_writing_weights=False, center_unembed=False)
    return hooked


def test_transformer_lens_runs_the_checkpoint(tmp_path):
    """TransformerLens on the checkpoint, by the route of the installed line (4.x in the `export`
    extra alone, 3.9 in `all`): logits equal the Hugging Face model's within 1e-4 for a causal
    and a bidirectional program, and the cache holds the norm's hooks."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    pytest.importorskip("transformer_lens")
    causal = to_huggingface(_case("count_so_far", 5, causal=True), tmp_path / "causal").folder
    plain = to_huggingface(compile_rasp(lib.make_sort_unique(rasp.tokens, rasp.tokens), {1, 2, 3, 4, 5}, 5,
                                        norm="layernorm"), tmp_path / "plain").folder
    for folder, text in ((causal, "t0 t1 t1 t0 t1"), (plain, "3 1 5 2")):
        tokenizer = AutoTokenizer.from_pretrained(folder)
        ids = tokenizer([text], return_tensors="pt")["input_ids"]
        tl_model = _transformer_lens_model(folder)
        with torch.no_grad():
            theirs, cache = tl_model.run_with_cache(ids)
            ours = AutoModelForCausalLM.from_pretrained(folder)(ids).logits
        assert torch.allclose(theirs, ours, atol=1e-4)
        assert "blocks.0.ln1.hook_scale" in cache
    assert _tokens(tokenizer, theirs) == ["<none>", "1", "2", "3", "5"]


def test_nnsight_traces_and_patches_the_checkpoint(tmp_path):
    """nnsight's `LanguageModel` on the checkpoint: a trace reads block outputs and the logits, and
    patching block 0's MLP output (sort_unique's target positions) from another input moves each
    token to where that input's ranks put it, exactly as the compiled mechanism says."""
    import warnings

    from nnsight import LanguageModel

    folder = to_huggingface(compile_rasp(lib.make_sort_unique(rasp.tokens, rasp.tokens), {1, 2, 3, 4, 5}, 5,
                                         norm="layernorm"), tmp_path / "sort").folder
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nnsight 0.8 announces LanguageModel's successor
        model = LanguageModel(str(folder), dispatch=True)
    with model.trace("3 1 5 2"):
        hidden = model.transformer.h[0].output.save()
        logits = model.lm_head.output.save()
    assert hidden.shape[:2] == (1, 5)
    assert _tokens(model.tokenizer, logits) == ["<none>", "1", "2", "3", "5"]
    with model.trace("2 4 1 3"):
        ranks = model.transformer.h[0].mlp.output.save()
    with model.trace("3 1 5 2"):
        model.transformer.h[0].mlp.output[:] = ranks
        patched = model.lm_head.output.save()
    # "2 4 1 3" ranks its positions 2, 4, 1, 3: the tokens 3, 1, 5, 2 land at those ranks
    assert _tokens(model.tokenizer, patched) == ["<none>", "5", "3", "2", "1"]


def test_tokens_that_print_with_spaces_become_single_words(tmp_path):
    """The tokenizer splits on whitespace, so the tuple token (0, 1) is the word `(0,1)`; such a
    checkpoint still reads and decodes every input."""
    program = rasp.Map(lambda pair: pair[0] + pair[1], rasp.tokens)
    model = compile_rasp(program, {(0, 1), (1, 1), (2, 0)}, 3, norm="layernorm")
    export = to_huggingface(model, tmp_path / "pairs")
    assert {"(0,1)", "(1,1)", "(2,0)"} <= set(export.tokens)
    inputs = _inputs(model, None)
    (got,), modules = run_in_fresh_process([(export.folder, input_texts(export, inputs, model), None)])
    assert modules == [] and got == expected_outputs(export, model, inputs)


def test_saelens_trains_on_the_checkpoint(tmp_path):
    """SAELens loads the checkpoint by its folder (`model_class_name="AutoModelForCausalLM"`, no
    TransformerLens involved): the activations its `ActivationsStore` reads at the last block's
    output are the compiled model's final residual stream (then zero padding) within 1e-5 on all
    3,125 full-length inputs of sort_unique 5/5, and a few training steps lower the SAE's
    reconstruction error."""
    pytest.importorskip("sae_lens", reason="SAELens is not installed (the sae extra)")
    import torch

    model = compile_rasp(lib.make_sort_unique(rasp.tokens, rasp.tokens), {1, 2, 3, 4, 5}, 5, norm="layernorm")
    export = to_huggingface(model, tmp_path / "sort")
    inputs = [row for row in _inputs(model, None) if len(row) == 5]
    ids = model.input_encoder.encode_batch([[model.input_encoder.bos, *row] for row in inputs])
    width, last = model.config.residual_width, export.n_layer - 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        runner = saelens_training(ids, export.n_embd, 2 * export.n_embd, f"transformer.h.{last}",
                                  model_class_name="AutoModelForCausalLM", model_name=str(export.folder))
        activations = runner.activations_store.get_activations(torch.tensor(ids)).reshape(len(ids), ids.shape[1], -1)
        residual = np.asarray(model.forward(model.params, ids).residuals[-1])
        np.testing.assert_allclose(activations[..., :width].numpy(), residual, atol=1e-5)
        assert not activations[..., width:].any()  # the padding GPT-2's head count asked for
        before, after = saelens_error_before_and_after(runner, activations.reshape(-1, export.n_embd))
    assert np.isfinite(after) and after < before
