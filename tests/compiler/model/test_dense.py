"""Dense labelled weights (`compiler.model.dense`): they equal the sparse storage entry by entry,
carry the right names, and the dense model computes what the sparse one does."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from support import random_inputs

from compiler import compile_rasp, load_model, save_model
from compiler.model.config import AttentionSpec, SparseLinear
from compiler.model.dense import LabelledMatrix
from compiler.model.weights import module_params
from rasp import lib, rasp


def _stored_entries(spec: SparseLinear, param: np.ndarray):
    """`(residual-or-hidden row, column, value)` of every stored entry, read from the storage."""
    matrix = spec.dense(np.asarray(param))
    rows = range(spec.shape[0]) if spec.in_idx is None else spec.in_idx
    cols = range(spec.shape[1]) if spec.out_idx is None else spec.out_idx
    for r, row in enumerate(rows):
        for c, col in enumerate(cols):
            if matrix[r, c]:
                yield row, col, matrix[r, c]


def _storage(model) -> dict[str, tuple[SparseLinear, np.ndarray]]:
    """The sparse spec and parameter behind every labelled-weight key."""
    config = model.config
    embed, unembed = module_params(model, "embed"), module_params(model, "unembed")
    found = {
        "embed/token": (config.token_embed, embed["token"]),
        "embed/position": (config.pos_embed, embed["position"]),
        "unembed": (config.unembed, unembed["w_u"]),
    }
    for index, layer in enumerate(config.layers):
        params = module_params(model, f"layer_{index}")
        if isinstance(layer, AttentionSpec):
            for h, head in enumerate(layer.heads):
                for name in "qkvo":
                    found[f"layer_{index}/head_{h}/w_{name}"] = (getattr(head, f"w_{name}"), params[f"head_{h}_{name}"])
        elif layer.w_in.shape[1]:
            found[f"layer_{index}/mlp/w_in"] = (layer.w_in, params["w_in"])
            found[f"layer_{index}/mlp/w_out"] = (layer.w_out, params["w_out"])
    return found


def test_labelled_weights_equal_the_sparse_storage_entry_by_entry(sort_unique_model) -> None:
    model = sort_unique_model
    weights = model.labelled_weights()
    storage = _storage(model)
    assert set(weights) == set(storage)
    for key, (spec, param) in storage.items():
        dense = weights[key].values
        entries = list(_stored_entries(spec, param))
        assert np.count_nonzero(dense) == len(entries), key
        for row, col, value in entries:
            assert dense[row, col] == value, key


def test_rows_and_columns_are_named(sort_unique_model) -> None:
    model = sort_unique_model
    weights = model.labelled_weights()
    labels = model.residual_labels
    token = weights["embed/token"]
    assert token.rows == ("1", "2", "3", "4", "5", "BOS", "PAD") and token.cols == labels
    assert token["BOS", "tokens:BOS"] == 1.0 and token["3", "tokens:3"] == 1.0
    assert weights["embed/position"].rows[0] == "pos 0"
    unembed = weights["unembed"]
    assert unembed.cols == tuple(str(v) for v in model.output_encoder.values) and unembed.rows == labels
    mlp = next(key for key in weights if key.endswith("mlp/w_in"))
    assert all(":" in name for name in weights[mlp].cols)  # the compiler's hidden directions
    head = weights["layer_0/head_0/w_q"]
    assert head.rows == labels and head.cols[0] == "q0" and np.asarray(head).shape == head.shape
    assert all(value != 0 for _, _, value in head.nonzero())
    with pytest.raises(KeyError, match="no row labelled 'nope'"):
        token.row("nope")
    with pytest.raises(ValueError, match="for 2 row and 1 column labels"):
        LabelledMatrix(np.zeros((3, 1)), ("a", "b"), ("c",))


def test_loaded_models_number_their_hidden_units(sort_unique_model, tmp_path) -> None:
    path = tmp_path / "model.safetensors"
    save_model(sort_unique_model, path)
    loaded = load_model(path).labelled_weights()
    original = sort_unique_model.labelled_weights()
    mlp = next(key for key in loaded if key.endswith("mlp/w_in"))
    assert loaded[mlp].cols[0] == "hidden 0"
    for key, matrix in original.items():
        np.testing.assert_array_equal(loaded[key].values, matrix.values, err_msg=key)


@pytest.mark.parametrize(
    "build",
    [
        lambda: compile_rasp(lib.make_sort_unique(rasp.tokens, rasp.tokens), {1, 2, 3, 4}, 4),
        lambda: compile_rasp([lib.make_hist(), lib.make_frac_prevs(rasp.tokens == "a")], {"a", "b"}, 4),
    ],
    ids=["sort_unique", "hist+frac_prevs"],
)
def test_dense_model_computes_the_sparse_model(build) -> None:
    model = build()
    dense = model.dense()
    width = model.config.residual_width
    for (path, leaf) in jax.tree_util.tree_flatten_with_path(dense.params)[0]:
        assert leaf.ndim == 2 and width in leaf.shape, path  # every weight a [D, ...] or [..., D] matrix
    vocab = list(model.input_encoder.vocab)
    batch = [["BOS", *xs] for xs in random_inputs(vocab, 4, 40, seed=1)]
    assert dense.apply_batch(batch) == model.apply_batch(batch)
    ids = model.input_encoder.encode_batch(batch)
    w = np.random.default_rng(0).normal(size=(width, width - 2)).astype(np.float32) / width
    for projection in (None, w):
        ours = model.forward(model.params, ids, projection=projection)
        theirs = dense.forward(dense.params, ids, projection=projection)
        np.testing.assert_allclose(np.asarray(theirs.output), np.asarray(ours.output), atol=1e-5)
        for a, b in zip(theirs.residuals, ours.residuals, strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5)
