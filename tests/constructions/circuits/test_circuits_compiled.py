"""Section 11-12.4: circuit analysis on compiled RASP programs and on an assembled SFB head."""


import numpy as np
import pytest

pytest.importorskip("compiler.model.assemble")

import rasp
from compiler import compile_rasp
from constructions.circuits.compiled import (
    as_attention_only,
    compiled_heads,
    compiled_ov_table,
    compiled_qk_table,
)
from constructions.circuits.path_expansion import expand_paths
from rasp import lib

VOCAB = (1, 2, 3, 4)


def _aggregate_with(predicate):
    select = rasp.Select(rasp.tokens, rasp.tokens, predicate)
    values = rasp.numerical(rasp.Map(lambda x: x, rasp.tokens))
    return rasp.numerical(rasp.Aggregate(select, values, default=0))


def _selector_table(model):
    """Token-level QK table of the model's only attention head, over the vocabulary."""
    (sublayer, heads), = compiled_heads(model).items()
    assert len(heads) == 1
    return compiled_qk_table(model, sublayer, 0).sub(VOCAB, VOCAB)


@pytest.mark.parametrize("predicate", [rasp.Comparison.LT, rasp.Comparison.LEQ,
                                       rasp.Comparison.GT, rasp.Comparison.GEQ,
                                       rasp.Comparison.EQ, rasp.Comparison.NEQ])
def test_token_qk_table_reproduces_selector_predicate(predicate):
    table = _selector_table(compile_rasp(_aggregate_with(predicate), set(VOCAB), 5))
    expected = {(q, k) for q in VOCAB for k in VOCAB if predicate(k, q)}
    assert table.where(table.values.max() / 2) == expected
    assert np.all((table.values == 0) | (table.values == table.values.max()))


@pytest.mark.parametrize("program, predicate", [
    (lib.make_hist(), rasp.Comparison.EQ),
    (lib.make_length(), rasp.Comparison.TRUE),
])
def test_library_selector_widths(program, predicate):
    model = compile_rasp(program, set(VOCAB), 5)
    table = _selector_table(model)
    expected = {(q, k) for q in VOCAB for k in VOCAB if predicate(k, q)}
    assert table.where(table.values.max() / 2) == expected


def test_path_expansion_of_compiled_attention_only_program():
    model = compile_rasp(lib.shift_by(1, rasp.tokens), {"a", "b", "c"}, 4)
    circuit_model = as_attention_only(model)
    for tokens in (["BOS", "a", "c", "b", "a"], ["BOS", "c", "c"]):
        ids = model.input_encoder.encode(tokens)
        expansion = expand_paths(circuit_model, ids)
        output = np.asarray(model.run(np.array([ids])).output[0])
        assert set(expansion.terms) == {"direct", "L0H0"}
        assert np.abs(expansion.total() - output).max() < 1e-4
    # The OV circuit copies the token into the shifted s-op's matching value.
    sublayer = next(iter(compiled_heads(model)))
    ov = compiled_ov_table(model, sublayer, 0)
    label = next(name for name in ov.col_labels if name.endswith(":b") and not name.startswith("tokens"))
    assert ov["b", label] == pytest.approx(1.0)
    assert ov["a", label] == pytest.approx(0.0)


def test_as_attention_only_refuses_mlps():
    # Unoptimised, so the numerical Map stays an MLP (fold_maps would move it into W_OV).
    model = compile_rasp(_aggregate_with(rasp.Comparison.LT), set(VOCAB), 5, optimize=False)
    with pytest.raises(ValueError, match="MLP"):
        as_attention_only(model)


def _orthonormal_features(n):
    from constructions.superposition.features import FeatureSpace

    q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(n, n)))
    return FeatureSpace("f", tuple(range(n)), q.T.copy(), q.T.copy(), tuple(range(n)))


def _feature_rows(features, residual):
    rows = np.zeros((features.n_features, residual.num_dims))
    rows[:, residual.indices(features.space.basis)] = features.read
    return rows


def test_sfb_head_feature_table_reproduces_bigrams_in_craft_and_assembled_model():
    from compiler.model.from_craft import model_from_craft
    from compiler.passes.layout import CraftModel, Embeddings
    from constructions.circuits.attention_only import bilinear_table
    from constructions.circuits.to_craft import attention_layers
    from constructions.superposition.craft_blocks import sfb_head
    from constructions.superposition.sfb import build_sfb_exact, random_bigrams
    from craft.bases import join_vector_spaces

    features = _orthonormal_features(12)
    bigrams = random_bigrams(12, 9, seed=1)
    expected = {(int(a), int(b)) for a, b in bigrams}
    head = sfb_head(features.space, build_sfb_exact(features, bigrams).w_q,
                    build_sfb_exact(features, bigrams).w_k)
    residual = join_vector_spaces(head.input_space, head.output_space)
    rows = _feature_rows(features, residual)

    (craft_head,), = attention_layers([head], residual)
    table = bilinear_table(craft_head.qk, rows, rows, features.labels, features.labels)
    assert table.where(0.5) == expected
    indicator = np.array([[1.0 if (q, k) in expected else 0.0 for k in range(12)]
                          for q in range(12)])
    assert np.abs(table.values - indicator).max() < 1e-10

    embed = Embeddings(np.zeros((3, residual.num_dims), np.float32),
                       np.zeros((2, residual.num_dims), np.float32), 2)
    assembled_model = model_from_craft(CraftModel(residual, (head, None), embed, residual, max_seq_len=1,
                                                  causal=False))
    (assembled,), = compiled_heads(assembled_model).values()
    assert assembled.w_q.shape[1] == len(bigrams)  # explicit factors keep d_qk = |B|
    table = bilinear_table(assembled.qk, rows, rows, features.labels, features.labels)
    assert table.where(0.5) == expected
    assert np.abs(table.values - indicator).max() < 1e-5
