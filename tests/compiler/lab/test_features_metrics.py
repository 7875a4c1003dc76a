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
