"""Co-firing classes and the dictionary MCC on hand-made codes (pure numpy, fast)."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.lab.features.metrics import cofiring, dictionary_mcc


def test_features_that_always_fire_together_form_one_class_with_a_sparser_exact_dictionary():
    rng = np.random.default_rng(0)
    token = rng.integers(0, 3, 500)
    other = rng.integers(0, 2, 500)
    # columns: token one-hot (3), a bijection of the token (3, same pattern), an independent bit (2)
    codes = np.concatenate([np.eye(3)[token], np.eye(3)[token][:, [1, 2, 0]], np.eye(2)[other]], axis=1)
    found = cofiring(np.array_split(codes, 7))
    assert found.rows == 500 and found.num_classes == 5
    assert found.classes[1] == found.classes[3] and found.classes[2] == found.classes[4]
    assert found.classes[0] == found.classes[5] and found.classes[6] != found.classes[7]
    assert len(set(found.classes[:3]) | set(found.classes[6:])) == 5
    assert found.true_l0 == pytest.approx(3.0) and found.class_l0 == pytest.approx(2.0)
    assert found.distinct_code_sets == 6
    vectors = rng.normal(size=(8, 4))
    merged = found.class_vectors(vectors)
    # the class dictionary reconstructs every activation exactly with fewer active latents
    class_codes = np.zeros((500, found.num_classes))
    class_codes[np.arange(500)[:, None], found.classes[np.nonzero(codes)[1].reshape(500, 3)]] = 1
    np.testing.assert_allclose(class_codes @ merged, codes @ vectors, atol=1e-5)
    assert dictionary_mcc(vectors, vectors) == pytest.approx(1.0)
    assert dictionary_mcc(merged, vectors) < 1.0


def test_cofiring_needs_data():
    with pytest.raises(ValueError, match="no true codes"):
        cofiring([])


def test_the_true_dictionary_cut_to_k_latents_loses_exactly_the_dropped_features():
    from compiler.lab.features.metrics import GroundTruth, TopKOf, perfect_coder, synthetic_scores

    rng = np.random.default_rng(1)
    # 8 orthonormal unit features; each activation has 1 to 6 of them on (code 1): a varying L0
    l0 = rng.integers(1, 7, 400)
    codes = np.zeros((400, 8), np.float32)
    for row, count in enumerate(l0):
        codes[row, rng.choice(8, count, replace=False)] = 1.0
    truth = GroundTruth(tuple(f"f:{i}" for i in range(8)), np.eye(8, dtype=np.float32), 8, np.zeros(8, np.float32),
                        np.arange(8), np.arange(0))
    acts = codes @ truth.vectors
    variance = np.mean(np.sum(acts ** 2, axis=1)) - np.sum(acts.mean(axis=0) ** 2)
    assert synthetic_scores(perfect_coder(truth), truth, [(acts, codes)]).explained_variance == pytest.approx(1.0)
    for k in (1, 3, 6):
        scores = synthetic_scores(TopKOf(perfect_coder(truth), k), truth, [(acts, codes)])
        # each dropped unit feature leaves a squared residual of exactly 1
        dropped = np.mean(np.maximum(l0 - k, 0))
        assert scores.explained_variance == pytest.approx(1.0 - dropped / variance, abs=1e-6)
        assert scores.sae_l0 == pytest.approx(np.mean(np.minimum(l0, k)))
    with pytest.raises(ValueError, match="k must be positive"):
        TopKOf(perfect_coder(truth), 0)


def test_the_perfect_sae_separates_codes_that_overlap_beyond_one_half():
    """Eight values of one s-op share 3 dimensions (overlaps up to about 0.8) beside a second s-op
    on its own two axes: a fixed threshold of 0.5 fires on off values, the default threshold
    (halfway between 1 and the most a feature reads while off) recovers every code."""
    from compiler.lab.features.metrics import GroundTruth, off_reads, perfect_coder, synthetic_scores

    rng = np.random.default_rng(2)
    code = rng.standard_normal((8, 3))
    code /= np.linalg.norm(code, axis=1, keepdims=True)
    vectors = np.zeros((10, 5), np.float32)
    vectors[:8, :3], vectors[8:, 3:] = code, np.eye(2)
    truth = GroundTruth(tuple([f"a:{i}" for i in range(8)] + ["b:0", "b:1"]), vectors, 10, np.zeros(5, np.float32),
                        np.arange(10), np.arange(0))
    gram = code @ code.T
    np.fill_diagonal(gram, -np.inf)
    np.testing.assert_allclose(off_reads(truth)[:8], np.maximum(gram.max(axis=1), 0), atol=1e-6)
    np.testing.assert_array_equal(off_reads(truth)[8:], 0.0)
    assert 0.5 < gram.max() < 1.0
    codes = np.zeros((300, 10), np.float32)
    codes[np.arange(300), rng.integers(0, 8, 300)] = 1.0
    codes[np.arange(300), 8 + rng.integers(0, 2, 300)] = 1.0
    acts = codes @ vectors
    exact = synthetic_scores(perfect_coder(truth), truth, [(acts, codes)])
    assert exact.classification.f1_score == pytest.approx(1.0) and exact.explained_variance == pytest.approx(1.0)
    fixed = synthetic_scores(perfect_coder(truth, threshold=0.5), truth, [(acts, codes)])
    assert fixed.classification.precision < 1.0
