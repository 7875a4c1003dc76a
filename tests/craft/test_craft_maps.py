"""Linear and bilinear maps."""

import numpy as np
import pytest

from craft.bases import BasisDirection, VectorInBasis, VectorSpaceWithBasis
from craft.maps import BilinearMap, LinearMap, combine_in_parallel, project


def _spaces():
    a = VectorSpaceWithBasis.from_values("a", range(3))
    b = VectorSpaceWithBasis.from_values("b", range(4))
    c = VectorSpaceWithBasis.from_names(["c1", "c2"])
    return a, b, c


def test_from_action_and_apply():
    a, b, _ = _spaces()

    def action(d):
        if d.value == 2:
            return None
        return b.vector_from_basis_direction(BasisDirection("b", d.value + 1))

    m = LinearMap.from_action(a, b, action)
    assert m.matrix.shape == (3, 4)
    x = VectorInBasis(a.basis, np.array([[1.0, 0, 0], [0, 2.0, 0], [0, 0, 5.0]]))
    np.testing.assert_array_equal(m.apply(x).magnitudes, [[0, 1, 0, 0], [0, 0, 2, 0], [0, 0, 0, 0]])
    assert m.entry(BasisDirection("a", 1), BasisDirection("b", 2)) == 1.0


def test_from_action_rejects_foreign_directions():
    a, b, c = _spaces()
    with pytest.raises(ValueError, match="outside"):
        LinearMap.from_action(a, b, lambda d: c.vector_from_basis_direction(BasisDirection("c1")))


def test_compose_matches_matrix_product_and_embedding():
    a, b, c = _spaces()
    rng = np.random.default_rng(1)
    m1 = LinearMap(a, b, rng.normal(size=(3, 4)))
    m2 = LinearMap(b, c, rng.normal(size=(4, 2)))
    composed = m1 @ m2
    np.testing.assert_allclose(composed.matrix, m1.matrix @ m2.matrix)
    x = VectorInBasis(a.basis, rng.normal(size=(5, 3)))
    np.testing.assert_allclose(composed.apply(x).magnitudes, m2.apply(m1.apply(x)).magnitudes)
    big_in = VectorSpaceWithBasis(c.basis + a.basis)
    emb = m1.on_spaces(big_in, b)
    np.testing.assert_allclose(emb.apply(x).magnitudes, m1.apply(x).magnitudes)
    assert emb.on_spaces(a, b).matrix.tolist() == m1.matrix.tolist()


def test_combine_in_parallel_and_project():
    a, b, c = _spaces()
    m1 = LinearMap(a, c, np.ones((3, 2)))
    m2 = LinearMap(b, c, 2 * np.ones((4, 2)))
    both = combine_in_parallel([m1, m2])
    assert both.input_space.num_dims == 7
    x = VectorInBasis(both.input_space.basis, np.ones(7))
    np.testing.assert_allclose(both.apply(x).magnitudes, [11.0, 11.0])
    p = project(VectorSpaceWithBasis(a.basis + c.basis), a)
    np.testing.assert_array_equal(p.matrix, np.vstack([np.eye(3), np.zeros((2, 3))]))


def test_bilinear_scores():
    a, b, _ = _spaces()
    rng = np.random.default_rng(2)
    bl = BilinearMap(a, b, rng.normal(size=(3, 4)))
    space = VectorSpaceWithBasis(a.basis + b.basis)
    x = VectorInBasis(space.basis, rng.normal(size=(6, 7)))
    s = bl.scores(x, x)
    q = x.magnitudes[:, :3]
    k = x.magnitudes[:, 3:]
    np.testing.assert_allclose(s, q @ bl.matrix @ k.T)
    np.testing.assert_allclose(bl(x, x), np.diag(s))
    summed = bl + bl
    np.testing.assert_allclose(summed.on_spaces(a, b).matrix, 2 * bl.matrix)
