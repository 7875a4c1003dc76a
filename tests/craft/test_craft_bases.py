"""Bases: ordering, spaces, vectors, direct sums."""

import subprocess
import sys

import numpy as np
import pytest

from craft.bases import (
    BasisDirection,
    VectorInBasis,
    VectorSpaceWithBasis,
    direct_sum,
    join_vector_spaces,
    sort_directions,
)

MIXED = [None, True, 0, 2.5, -1, "a", "B", (1, "x"), (1, 2), 10**20, float("nan"), frozenset({"q", "p"})]


def _mixed_dirs():
    return [BasisDirection("x", v) for v in MIXED] + [BasisDirection("a"), BasisDirection("z", 1)]


def test_str():
    assert str(BasisDirection("one")) == "one"
    assert str(BasisDirection("tokens", "a")) == "tokens:a"


def test_total_order_mixed_types_is_permutation_invariant():
    dirs = _mixed_dirs()
    rng = np.random.default_rng(0)
    expected = sort_directions(dirs)
    for _ in range(20):
        perm = [dirs[i] for i in rng.permutation(len(dirs))]
        assert sort_directions(perm) == expected
    assert expected[0] == BasisDirection("a")
    assert expected[-1] == BasisDirection("z", 1)
    xs = [d.value for d in expected if d.name == "x"]
    assert xs[0] is None and xs[1:4] == [-1, 0, True]


def test_order_consistent_with_equality():
    # 1 == True == 1.0 in Python, so the directions are equal and must share a sort key.
    assert BasisDirection("x", 1) == BasisDirection("x", True) == BasisDirection("x", 1.0)
    assert BasisDirection("x", 1).sort_key() == BasisDirection("x", 1.0).sort_key()
    assert BasisDirection("x", 1).sort_key() == BasisDirection("x", True).sort_key()
    assert not BasisDirection("x", 1) < BasisDirection("x", 1.0)
    assert BasisDirection("x", 1) <= BasisDirection("x", 1.0)


_SUBPROCESS = """
from craft.bases import BasisDirection, VectorSpaceWithBasis
vals = [None, True, 0, 2.5, -1, "a", "B", (1, "x"), frozenset({"q", "p", "r"}), "zz", 3]
print([d.sort_key() for d in VectorSpaceWithBasis.from_values("x", set(vals)).basis])
"""


def test_order_stable_across_processes():
    outs = set()
    for seed in ("0", "1", "12345"):
        res = subprocess.run(
            [sys.executable, "-c", _SUBPROCESS],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
            cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]),
        )
        outs.add(res.stdout)
    assert len(outs) == 1


def test_space_construction_and_membership():
    space = VectorSpaceWithBasis.from_values("t", [3, 1, 2])
    assert [d.value for d in space.basis] == [1, 2, 3]
    assert space.num_dims == 3
    assert BasisDirection("t", 2) in space
    assert BasisDirection("t", 4) not in space
    sub = VectorSpaceWithBasis.from_values("t", [1])
    assert sub in space and sub.issubspace(space) and not space.issubspace(sub)
    assert space.index(BasisDirection("t", 3)) == 2
    with pytest.raises(KeyError, match="t:9"):
        space.index(BasisDirection("t", 9))
    names = VectorSpaceWithBasis.from_names(["b", "a"])
    assert [str(d) for d in names.basis] == ["a", "b"]
    with pytest.raises(ValueError, match="repeated"):
        VectorSpaceWithBasis((BasisDirection("a"), BasisDirection("a")))


def test_direct_sum_rejects_overlap_and_join_unions():
    a = VectorSpaceWithBasis.from_values("t", [1, 2])
    b = VectorSpaceWithBasis.from_values("t", [2, 3])
    c = VectorSpaceWithBasis.from_names(["one"])
    with pytest.raises(ValueError, match="overlap"):
        direct_sum(a, b)
    assert direct_sum(c, a).basis == c.basis + a.basis  # argument order kept
    joined = join_vector_spaces(b, c, a)
    assert [str(d) for d in joined.basis] == ["one", "t:1", "t:2", "t:3"]


def test_vectors_arithmetic_projection_stack():
    space = VectorSpaceWithBasis.from_values("t", [0, 1, 2])
    v = space.vector_from_basis_direction(BasisDirection("t", 1))
    w = space.vector_from_dict({BasisDirection("t", 0): 2.0})
    s = v + 3 * w - v * 2
    np.testing.assert_array_equal(s.magnitudes, [6.0, -1.0, 0.0])
    sub = VectorSpaceWithBasis((BasisDirection("t", 2), BasisDirection("t", 0), BasisDirection("u")))
    p = s.project(sub)
    assert p.basis_directions == sub.basis
    np.testing.assert_array_equal(p.magnitudes, [0.0, 6.0, 0.0])
    st = VectorInBasis.stack([v, w, s])
    assert st.shape == (3, 3)
    assert st.project(sub).shape == (3, 3)
    assert (-v).allclose(space.null_vector() - v)
    assert v == VectorInBasis(tuple(reversed(space.basis)), [0.0, 1.0, 0.0])
    basis_vecs = space.basis_vectors()
    assert VectorInBasis.sum(basis_vecs).allclose(VectorInBasis(space.basis, np.ones(3)))
    with pytest.raises(ValueError):
        v + VectorSpaceWithBasis.from_names(["a"]).null_vector()
