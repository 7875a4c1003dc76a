"""Weight forms: every form of every weight computes what the dense product computes."""

from __future__ import annotations

import dataclasses
import pathlib
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from support import REPO, random_inputs

from compiler import compile_rasp, load_model, save_model
from compiler.examples import EXAMPLES
from compiler.io.files import read_model_file
from compiler.model.config import FORMS, SparseLinear
from compiler.model.forms import check_forms, choose_forms, forced_forms, one_value_per_column
from compiler.model.transformer import _prefix_sums, _shared_interval, apply_linear
from compiler.model.weights import module_params
from craft.maps import dyadic_prefix_factors

# Programs whose every form runs in the default test run; the rest are marked slow.
QUICK = ("sort",)
DATA = pathlib.Path(__file__).parents[1] / "io" / "data"


def _weights(model) -> dict[str, dict[str, np.ndarray]]:
    return {module: module_params(model, module) for module, _ in model.config.linears()}


def _forced(model, form: str):
    return model.with_config(forced_forms(model.config, _weights(model), form))


def _ids(model, name: str) -> np.ndarray:
    example = EXAMPLES[name]
    batch = [["BOS", *tokens] for tokens in random_inputs(example.vocab, example.max_seq_len, 40, seed=3)]
    return model.input_encoder.encode_batch(batch)


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=() if n in QUICK else pytest.mark.slow) for n in EXAMPLES]
)
def test_every_form_agrees_with_the_dense_product(name):
    example = EXAMPLES[name]
    model = compile_rasp(example.build(example.max_seq_len), example.vocab, example.max_seq_len)
    ids = _ids(model, name)
    reference = _forced(model, "rebuild")  # every sparse weight made dense: plain matmuls
    expected = reference.run(ids)
    for form in FORMS:
        forced = _forced(model, form)
        got = forced.run(ids)
        np.testing.assert_allclose(np.asarray(got.output), np.asarray(expected.output), rtol=1e-4, atol=1e-4)
        for row in range(len(ids)):
            assert forced.output_encoder.decode(np.asarray(got.output[row])) == reference.output_encoder.decode(
                np.asarray(expected.output[row])
            ), (form, row)


def test_the_interval_form_applies_dyadic_factors_exactly():
    rng = np.random.default_rng(0)
    m = 100
    a, b = dyadic_prefix_factors(rng.permutation(m), rng.integers(0, m + 1, size=m), 7.0)
    for factor in (a, b):
        spec, param = SparseLinear.from_matrix(factor)
        assert spec.is_sparse and spec.interval is not None and one_value_per_column(spec, param)
        spec = dataclasses.replace(spec, form="interval")
        x = np.eye(m, dtype=np.float32)[rng.integers(0, m, size=(3, 20))]
        got = np.asarray(apply_linear(spec, jnp.asarray(param), jnp.asarray(x)))
        np.testing.assert_array_equal(got, x @ factor.toarray().astype(np.float32))


def test_a_pattern_without_contiguous_columns_has_no_interval_form():
    # Each column holds two of three rows, every pair once: no row order keeps all three together.
    matrix = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]], dtype=np.float32)
    assert SparseLinear.from_matrix(np.kron(np.eye(4), matrix))[0].interval is None
    with pytest.raises(ValueError, match="form"):
        SparseLinear((3, 3), form="columns")  # dense storage allows only the dense form


@pytest.mark.parametrize("length", [1, 31, 32, 33, 100])
def test_prefix_sums(length):
    x = np.random.default_rng(length).integers(0, 3, size=(2, length)).astype(np.float32)
    expected = np.concatenate([np.zeros((2, 1), np.float32), np.cumsum(x, axis=-1)], axis=-1)
    np.testing.assert_array_equal(np.asarray(_prefix_sums(jnp.asarray(x))), expected)


def test_sort_at_50_uses_intervals_for_its_order_comparison():
    example = EXAMPLES["sort"]
    model = compile_rasp(example.build(50), example.scaled_vocab(50), 50)
    forms = {key: spec.form for key, spec in model.config.linears().items()}
    assert model.config.backend == "cpu"
    assert sum(form == "interval" for form in forms.values()) == 2, forms  # the head's W_Q and W_K
    check_forms(model.config, _weights(model))


@pytest.mark.parametrize("name", ["sort", "sort_freq"])
def test_an_order_heads_query_and_key_share_one_prefix_sum(name):
    # Every order comparison's W_Q and W_K in the interval form: each head finds one order of
    # the coordinates both read, and q, k from the one prefix sum equal the separate products.
    example = EXAMPLES[name]
    vocab = example.scaled_vocab(8)
    model = _forced(compile_rasp(example.build(8), vocab, 8), "interval")
    weights = _weights(model)
    x = jnp.asarray(np.eye(model.config.residual_width, dtype=np.float32)[np.arange(30) % model.config.residual_width])
    shared = 0
    for index, layer in enumerate(model.config.layers):
        for h, head in enumerate(getattr(layer, "heads", ())):
            if head.shared_interval is None:
                continue
            shared += 1
            params = [jnp.asarray(weights[f"layer_{index}"][f"head_{h}_{part}"]) for part in "qk"]
            q, k = _shared_interval(head.shared_interval, *params, x)
            np.testing.assert_array_equal(np.asarray(q), np.asarray(apply_linear(head.w_q, params[0], x)))
            np.testing.assert_array_equal(np.asarray(k), np.asarray(apply_linear(head.w_k, params[1], x)))
    assert shared >= 2  # sort_unique's `<` and the sort's own comparison of the unique keys
    ids = model.input_encoder.encode_batch([["BOS", *tokens] for tokens in random_inputs(vocab, 8, 40, seed=3)])
    assert [model.output_encoder.decode(np.asarray(row)) for row in model.run(ids).output] == [
        model.output_encoder.decode(np.asarray(row)) for row in _forced(model, "rebuild").run(ids).output
    ]


@pytest.mark.parametrize("form", [pytest.param(f, marks=() if f == "interval" else pytest.mark.slow) for f in FORMS])
def test_files_record_forms_and_load_equal(form, tmp_path):
    example = EXAMPLES["sort"]
    model = _forced(compile_rasp(example.build(6), example.vocab, 6), form)
    ids = _ids(model, "sort")
    path = save_model(model, tmp_path / f"{form}.safetensors", storage="sparse")
    loaded = load_model(path)
    assert loaded.config == model.config
    np.testing.assert_array_equal(np.asarray(loaded.run(ids).output), np.asarray(model.run(ids).output))


def test_a_file_written_before_forms_loads_and_gets_forms_chosen():
    """`data/sort_format2_before_forms.safetensors` was written before weight forms were recorded."""
    record = read_model_file(DATA / "sort_format2_before_forms.safetensors")
    example = EXAMPLES["sort"]
    fresh = compile_rasp(example.build(6), example.vocab, 6)
    assert record.model.config.backend == "cpu"
    assert all(spec.form is not None for spec in record.model.config.linears().values())
    ids = _ids(fresh, "sort")
    np.testing.assert_array_equal(np.asarray(record.model.run(ids).output), np.asarray(fresh.run(ids).output))


def test_an_interval_form_on_a_weight_without_its_shape_is_refused():
    example = EXAMPLES["hist"]
    model = compile_rasp(example.build(5), example.vocab, 5)
    weights = _weights(model)
    key, spec = next((k, s) for k, s in model.config.linears().items() if s.is_sparse and not one_value_per_column(s, weights[k[0]][k[1]]))
    config = model.config.with_linears({key: dataclasses.replace(spec, form="interval")}, "cpu")
    with pytest.raises(ValueError, match="interval"):
        check_forms(config, weights)


def test_choose_forms_keeps_small_weights_as_they_were():
    example = EXAMPLES["reverse"]
    model = compile_rasp(example.build(5), example.vocab, 5)
    chosen = choose_forms(model.config, _weights(model), "gpu")
    assert all(spec.form == spec.default_form for spec in chosen.linears().values())


def test_run_pads_every_length_to_one_executable():
    example = EXAMPLES["reverse"]
    model = compile_rasp(example.build(5), example.vocab, 5)
    model.warmup(batch_size=1)
    assert model.apply(["BOS", "a", "b"]).decoded == ["BOS", "b", "a"]
    result = model.apply(["BOS", "a", "b", "c"])
    assert result.decoded == ["BOS", "c", "b", "a"]
    assert result.residuals[0].values.shape[0] == 4 and result.attention[0].shape[-2:] == (4, 4)
    assert model.forward._cache_size() == 0  # both calls ran the warmed-up executable


def test_enable_compilation_cache_writes_executables(tmp_path):
    # In a child process: the cache setting is process-wide and JAX initialises it once.
    code = (
        "import sys; from compiler.model.jit_cache import enable_compilation_cache\n"
        "from compiler import compile_rasp; from compiler.examples import EXAMPLES\n"
        "enable_compilation_cache(sys.argv[1]); e = EXAMPLES['length']\n"
        "compile_rasp(e.build(3), e.vocab, 3).warmup()\n"
    )
    folder = tmp_path / "cache"
    subprocess.run([sys.executable, "-c", code, str(folder)], cwd=REPO, check=True, timeout=300)
    assert any(folder.iterdir())
