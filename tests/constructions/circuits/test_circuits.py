"""Section 11: circuits on explicit weight matrices, path expansion, composition."""

import numpy as np
import pytest

from constructions.circuits.attention_only import (
    AttentionOnlyModel,
    HeadWeights,
    bilinear_table,
    copying_score,
    direct_path_table,
    head_output_sum,
    positional_qk_table,
    token_ov_table,
    token_qk_table,
    virtual_weights,
)
from constructions.circuits.factored import FactoredMatrix
from constructions.circuits.path_expansion import (
    all_paths,
    composition_scores,
    expand_paths,
    head_scores,
    score_terms,
    virtual_ov_table,
)

VOCAB, D_MODEL, D_QK, D_VO = 11, 16, 3, 2


def random_model(seed: int, n_layers: int = 2, heads: int = 2, positions: bool = False):
    rng = np.random.default_rng(seed)
    layers = tuple(
        tuple(HeadWeights(f"L{layer}H{h}", rng.normal(size=(D_MODEL, D_QK)) / 2,
                          rng.normal(size=(D_MODEL, D_QK)) / 2,
                          rng.normal(size=(D_MODEL, D_VO)) / 2, rng.normal(size=(D_VO, D_MODEL)) / 2)
              for h in range(heads))
        for layer in range(n_layers))
    return AttentionOnlyModel(
        w_e=rng.normal(size=(VOCAB, D_MODEL)), w_u=rng.normal(size=(D_MODEL, VOCAB)),
        layers=layers, w_pos=rng.normal(size=(8, D_MODEL)) if positions else None,
        token_labels=tuple(f"t{i}" for i in range(VOCAB)),
    )


@pytest.mark.parametrize("positions", [False, True])
def test_path_expansion_sums_to_forward_pass(positions):
    model = random_model(0, positions=positions)
    tokens = [3, 1, 4, 1, 5, 9, 2, 6]
    expansion = expand_paths(model, tokens)
    assert set(expansion.terms) == {"direct", "L0H0", "L0H1", "L1H0", "L1H1", "L0H0>L1H0",
                                    "L0H0>L1H1", "L0H1>L1H0", "L0H1>L1H1"}
    assert expansion.max_error() < 1e-10


def test_path_count_grows_with_layers_and_one_layer_form():
    assert len(all_paths(random_model(1, n_layers=3))) == 27  # (1 + 2)^3
    model = random_model(1, n_layers=1)
    tokens = [0, 2, 2, 7]
    expansion = expand_paths(model, tokens)
    # One layer: direct (bigram) + one skip-trigram term per head.
    x = model.w_e[tokens]
    for h, head in enumerate(model.layers[0]):
        pattern = expansion.trace.patterns[0][h]
        table = token_ov_table(model, head).values
        np.testing.assert_allclose(expansion.terms[head.name], pattern @ table[tokens], atol=1e-12)
    np.testing.assert_allclose(expansion.terms["direct"], direct_path_table(model).values[tokens])
    assert expansion.max_error() < 1e-10
    assert np.allclose(x @ model.w_u, expansion.terms["direct"])


def test_virtual_head_table_and_score_decomposition():
    model = random_model(2)
    tokens = [1, 2, 3, 4, 5]
    expansion = expand_paths(model, tokens)
    path = ((0, 1), (1, 0))
    table = virtual_ov_table(model, path).values
    a1, a2 = expansion.trace.patterns[0][1], expansion.trace.patterns[1][0]
    np.testing.assert_allclose(expansion.terms["L0H1>L1H0"], a2 @ a1 @ table[tokens], atol=1e-12)
    terms = score_terms(model, tokens, layer=1, head=1)
    assert ("L0H0", "direct") in terms and ("direct", "L0H1") in terms and len(terms) == 9
    assert np.abs(sum(terms.values()) - head_scores(model, tokens, 1, 1)).max() < 1e-10


def test_ranks_factored_products_and_tables():
    model = random_model(3, positions=True)
    for heads in model.layers:
        for head in heads:
            assert head.qk.rank() <= D_QK and np.linalg.matrix_rank(head.qk.full()) <= D_QK
            assert head.ov.rank() <= D_VO
            np.testing.assert_allclose(head.qk.full(), head.w_q @ head.w_k.T)
            np.testing.assert_allclose((head.qk @ head.ov).full(), head.qk.full() @ head.ov.full())
            np.testing.assert_allclose(head.qk.T.full(), head.qk.full().T)
            assert abs(head.qk.norm() - np.linalg.norm(head.qk.full())) < 1e-10
            qk = token_qk_table(model, head)
            np.testing.assert_allclose(qk.values, model.w_e @ head.qk.full() @ model.w_e.T)
            assert qk["t3", "t5"] == pytest.approx(qk.values[3, 5])
            assert positional_qk_table(model, head).values.shape == (8, 8)
    heads = model.layers[0]
    np.testing.assert_allclose(head_output_sum(heads).full(), sum(h.ov.full() for h in heads))
    # Square (d_model x d_model) product of inner width VOCAB: the small side gives its spectrum.
    eig = FactoredMatrix(model.w_u, model.w_e).eigenvalues()
    full_eig = np.linalg.eigvals(model.w_u @ model.w_e)
    assert len(eig) == VOCAB
    assert np.allclose(np.sort(np.abs(eig)), np.sort(np.abs(full_eig))[-VOCAB:])


def test_copying_score_signs_and_composition():
    rng = np.random.default_rng(4)
    e = rng.normal(size=(VOCAB, D_MODEL))
    u = np.linalg.pinv(e)
    copier = HeadWeights("copy", np.eye(D_MODEL)[:, :1], np.eye(D_MODEL)[:, :1],
                         np.eye(D_MODEL), np.eye(D_MODEL))
    model = AttentionOnlyModel(e, u, ((copier,),))
    assert copying_score(token_ov_table(model, copier)) == pytest.approx(1.0)
    assert copying_score(-token_ov_table(model, copier).values) == pytest.approx(-1.0)
    assert copying_score(copier.ov) == pytest.approx(1.0)
    # A reader that reads only what the writer cannot write shows zero composition.
    writer = HeadWeights("w", np.zeros((4, 1)), np.zeros((4, 1)), np.eye(4)[:, :2], np.eye(4)[:2])
    reader = HeadWeights("r", np.eye(4)[:, 2:], np.eye(4)[:, 2:], np.eye(4)[:, 2:], np.eye(4)[2:])
    assert composition_scores(writer, reader) == composition_scores(writer, reader)
    scores = composition_scores(writer, reader)
    assert scores.q == scores.k == scores.v == 0.0
    aligned = HeadWeights("a", np.eye(4)[:, :2], np.eye(4)[:, :2], np.eye(4)[:, :2], np.eye(4)[:2])
    assert composition_scores(writer, aligned).v == pytest.approx(1 / np.sqrt(2))
    np.testing.assert_allclose(virtual_weights(writer.w_o, reader.w_q), writer.w_o @ reader.w_q)


def test_feature_basis_table_reproduces_bigram_set():
    rng = np.random.default_rng(5)
    d, m = 24, 10
    feats = np.linalg.qr(rng.normal(size=(d, m)))[0].T  # orthonormal feature rows
    bigrams = {(0, 3), (2, 2), (7, 1), (9, 4)}
    qk = sum(np.outer(feats[q], feats[k]) for q, k in bigrams)
    table = bilinear_table(qk, feats, feats, range(m), range(m))
    assert table.where(0.5) == bigrams
    np.testing.assert_allclose(table.values, np.array(
        [[1.0 if (q, k) in bigrams else 0.0 for k in range(m)] for q in range(m)]), atol=1e-12)
    assert table.sub([0, 2], [3]).values.tolist() == [[pytest.approx(1.0)], [pytest.approx(0.0, abs=1e-12)]]
