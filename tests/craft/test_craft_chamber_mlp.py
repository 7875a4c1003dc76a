"""Chamber MLPs reproduce their functions exactly on every input value (tolerance 1e-9, float64),
write nothing at BOS, and write nothing for None inputs."""

import numpy as np
import pytest
from support import BOS_SPACE, ONE_SPACE, decode_categorical, stream

from craft.bases import BasisDirection, VectorSpaceWithBasis
from craft.chamber.categorical_mlp import (
    OutputUnit,
    map_categorical_mlp,
    map_categorical_to_numerical_mlp,
    sequence_map_categorical_mlp,
)
from craft.chamber.numerical_mlp import (
    linear_sequence_map_numerical_mlp,
    map_numerical_mlp,
    map_numerical_to_categorical_mlp,
)

TOL = 1e-9
X = BasisDirection("x")
X_SPACE = VectorSpaceWithBasis((X,))
Y_SPACE = VectorSpaceWithBasis((BasisDirection("y"),))


def _cat_rows(name, values):
    return [{BasisDirection(name, v): 1.0} if v is not None else {} for v in values]


def test_map_categorical_lookup_all_values():
    values = list(range(20))
    in_space = VectorSpaceWithBasis.from_values("a", values)
    out_space = VectorSpaceWithBasis.from_values("b", range(6))  # 6 is missing on purpose

    def op(x):
        return None if x == 3 else x % 7

    mlp = map_categorical_mlp(in_space, out_space, op)
    out = mlp.apply(stream(in_space, _cat_rows("a", values + [None])))
    got = decode_categorical(out, "b")
    expected = [None] + [None if op(x) in (None, 6) else op(x) for x in values] + [None]
    assert got == expected
    assert all(d.name == "b_hidden" for d in mlp.hidden_space.basis)


def test_map_categorical_to_numerical_negative_outputs():
    values = ["a", "b", "c", (1, 2)]
    table = {"a": -2.5, "b": 0.0, "c": 7, (1, 2): None}
    in_space = VectorSpaceWithBasis.from_values("s", values)
    mlp = map_categorical_to_numerical_mlp(in_space, Y_SPACE, table.get)
    order = [d.value for d in in_space.basis]
    out = mlp.apply(stream(in_space, _cat_rows("s", order))).magnitudes[:, 0]
    np.testing.assert_allclose(out, [0.0] + [table[v] or 0.0 for v in order], atol=TOL)


@pytest.mark.parametrize("never_none", [False, True], ids=["may-be-none", "never-none"])
def test_narrow_lookup_computes_the_same_table_with_fewer_units(never_none):
    # Every output value takes the cheapest of: one unit per input, one unit for its inputs, or
    # (input never None) one unit for the complement. Exact on clean and on noisy one-hots.
    values = [f"t{i}" for i in range(12)]
    in_space = VectorSpaceWithBasis.from_values("a", values)
    out_space = VectorSpaceWithBasis.from_values("b", [0, 1, 2, 3])

    def op(x):  # t0 -> 0; t1..t3 -> 1; t4..t10 -> 2 (7 inputs); t11 -> nothing
        i = int(x[1:])
        return None if i == 11 else 0 if i == 0 else 1 if i <= 3 else 2

    bos = BOS_SPACE if never_none else None
    wide = map_categorical_mlp(in_space, out_space, op, one_space=ONE_SPACE)
    narrow = map_categorical_mlp(in_space, out_space, op, one_space=ONE_SPACE, narrow=True, bos_space=bos)
    units = {d.value for d in narrow.hidden_space.basis}
    # t0 alone: its own unit; t1..t3: one grouped unit (5 non-zeros instead of 9); t4..t10: the
    # complement (12 - 7 + 3 = 8 non-zeros) when allowed, else a grouped unit (9).
    complement = OutputUnit(2, complement=True)
    assert units == {"t0", OutputUnit(1), complement if never_none else OutputUnit(2)}
    rows = _cat_rows("a", values) + ([] if never_none else [{}])  # an empty input: None
    noisy = [{d: v + 1e-3 * (k % 3 - 1) for d, v in row.items()} for k, row in enumerate(rows)]
    for inputs in (rows, noisy):
        expected = decode_categorical(wide.apply(stream(in_space, inputs)), "b", tol=1e-2)
        got = decode_categorical(narrow.apply(stream(in_space, inputs)), "b", tol=1e-2)
        assert got == expected == [None, 0, 1, 1, 1, *[2] * 7, None] + ([] if never_none else [None])
    def non_zeros(mlp):
        return np.count_nonzero(mlp.first.matrix) + np.count_nonzero(mlp.second.matrix)

    assert non_zeros(wide) == 12 * 2 + 11  # 12 units (t11's writes nothing)
    assert non_zeros(narrow) == 3 + 5 + (8 if never_none else 9)


def test_narrow_numerical_lookup_has_one_unit_per_result():
    values = list(range(9))
    in_space = VectorSpaceWithBasis.from_values("s", values)
    table = {0: 0.0, 1: 2.5, 2: 2.5, 3: 2.5, 4: -1.0, 5: 0.0, 6: 0.0, 7: 0.0, 8: 0.0}
    mlp = map_categorical_to_numerical_mlp(in_space, Y_SPACE, table.get, one_space=ONE_SPACE, narrow=True,
                                           bos_space=BOS_SPACE)
    assert {d.value for d in mlp.hidden_space.basis} == {OutputUnit(2.5), 4}
    out = mlp.apply(stream(in_space, _cat_rows("s", values))).magnitudes[:, 0]
    np.testing.assert_allclose(out, [0.0] + [table[v] for v in values], atol=TOL)


FUNCS = {
    "square_minus": lambda x: x * x - 10,
    "negate": lambda x: -x,
    "step": lambda x: 1.0 if x > 0.3 else -4.0,
    "sin": lambda x: float(np.sin(3 * x)),
}


@pytest.mark.parametrize("exactness", [4, 10, 100, 1000])
@pytest.mark.parametrize("fname", sorted(FUNCS))
def test_map_numerical_exact_on_values_and_window(fname, exactness):
    f = FUNCS[fname]
    rng = np.random.default_rng(3)
    values = sorted(set(np.round(rng.uniform(-5, 5, 40), 2).tolist()))
    mlp = map_numerical_mlp(f, X_SPACE, Y_SPACE, values, ONE_SPACE, BOS_SPACE, exactness=exactness)
    xs = np.array(values)
    out = mlp.apply(stream(X_SPACE, [{X: x} for x in xs])).magnitudes[:, 0]
    assert out[0] == 0.0  # BOS
    np.testing.assert_allclose(out[1:], [f(x) for x in values], atol=TOL)
    # Inputs perturbed inside the documented window (at least a quarter gap) give the exact value.
    gap = np.min(np.diff(xs))
    window = gap / 4
    jitter = rng.uniform(-1, 1, len(xs)) * window
    out = mlp.apply(stream(X_SPACE, [{X: x} for x in xs + jitter], bos=False)).magnitudes[:, 0]
    np.testing.assert_allclose(out, [f(x) for x in values], atol=1e-7)


def test_map_numerical_hidden_width_and_degenerate_sets():
    mlp = map_numerical_mlp(lambda x: 2 * x, X_SPACE, Y_SPACE, [1, 2, 3, None], ONE_SPACE, BOS_SPACE)
    assert mlp.hidden_space.num_dims == 5
    single = map_numerical_mlp(lambda x: -3, X_SPACE, Y_SPACE, [4], ONE_SPACE, BOS_SPACE)
    out = single.apply(stream(X_SPACE, [{X: 4.0}])).magnitudes[:, 0]
    np.testing.assert_allclose(out, [0.0, -3.0])
    with pytest.raises(ValueError, match="exactness"):
        map_numerical_mlp(lambda x: x, X_SPACE, Y_SPACE, [1, 2], ONE_SPACE, BOS_SPACE, exactness=3)
    with pytest.raises(ValueError, match="empty"):
        map_numerical_mlp(lambda x: x, X_SPACE, Y_SPACE, [None], ONE_SPACE, BOS_SPACE)


def test_map_numerical_float32_weights_still_exact():
    values = list(range(0, 31))
    mlp = map_numerical_mlp(lambda x: (x % 5) - 2, X_SPACE, Y_SPACE, values, ONE_SPACE, BOS_SPACE)
    x = stream(X_SPACE, [{X: v} for v in values]).project(mlp.input_space).magnitudes.astype(np.float32)
    h = np.maximum(x @ mlp.first.matrix.astype(np.float32), 0)
    out = h @ mlp.second.matrix.astype(np.float32)
    # 30 saturated ramps with pre-activations up to MAX_PRE_ACTIVATION: float32 rounding in the
    # second layer stays well inside the compiler's 1e-3 tolerance for numerical outputs.
    np.testing.assert_allclose(out[1:, 0], [(v % 5) - 2 for v in values], atol=5e-4)
    assert out[0, 0] == 0.0


@pytest.mark.parametrize("exactness", [4, 100])
def test_map_numerical_to_categorical(exactness):
    values = [-2, -0.5, 0, 0.25, 1, 3, 8]
    out_space = VectorSpaceWithBasis.from_values("c", ["neg", "small", "big"])

    def f(x):
        return "neg" if x < 0 else ("small" if x < 2 else ("huge" if x > 5 else "big"))

    mlp = map_numerical_to_categorical_mlp(f, X_SPACE, out_space, values, ONE_SPACE, BOS_SPACE, exactness)
    out = mlp.apply(stream(X_SPACE, [{X: x} for x in values]))
    expected = [None] + [None if f(x) == "huge" else f(x) for x in values]
    assert decode_categorical(out, "c") == expected


def test_sequence_map_categorical_all_pairs_and_none():
    xs, ys = [0, 1, 2, 3, 4], ["a", "b", "c"]
    s1 = VectorSpaceWithBasis.from_values("x", xs)
    s2 = VectorSpaceWithBasis.from_values("y", ys)
    out_space = VectorSpaceWithBasis.from_values("o", {f"{y}{x}" for x in xs for y in ys})

    def op(x, y):
        return None if x == 2 else f"{y}{x}"

    mlp = sequence_map_categorical_mlp(s1, s2, out_space, op, ONE_SPACE, "o_hidden")
    assert mlp.hidden_space.num_dims == 15
    pairs = [(x, y) for x in xs + [None] for y in ys + [None]]
    rows = [
        {**({BasisDirection("x", x): 1.0} if x is not None else {}), **({BasisDirection("y", y): 1.0} if y is not None else {})}
        for x, y in pairs
    ]
    space = VectorSpaceWithBasis(s1.basis + s2.basis)
    got = decode_categorical(mlp.apply(stream(space, rows)), "o")
    expected = [None] + [None if x is None or y is None else op(x, y) for x, y in pairs]
    assert got == expected


def test_sequence_map_numerical_output():
    s1 = VectorSpaceWithBasis.from_values("x", range(4))
    s2 = VectorSpaceWithBasis.from_values("y", range(3))
    mlp = sequence_map_categorical_mlp(s1, s2, Y_SPACE.__class__((BasisDirection("z"),)), lambda a, b: a - 2 * b, ONE_SPACE, "z_h")
    rows = [{BasisDirection("x", a): 1.0, BasisDirection("y", b): 1.0} for a in range(4) for b in range(3)]
    out = mlp.apply(stream(VectorSpaceWithBasis(s1.basis + s2.basis), rows)).magnitudes[:, 0]
    np.testing.assert_allclose(out, [0.0] + [a - 2 * b for a in range(4) for b in range(3)], atol=TOL)


def test_linear_sequence_map():
    a, b = BasisDirection("a"), BasisDirection("b")
    sa, sb = VectorSpaceWithBasis((a,)), VectorSpaceWithBasis((b,))
    mlp = linear_sequence_map_numerical_mlp(sa, sb, Y_SPACE, 2.0, -0.5, "y_h")
    rng = np.random.default_rng(0)
    vals = rng.normal(size=(50, 2)) * 10
    out = mlp.apply(stream(VectorSpaceWithBasis((a, b)), [{a: x, b: y} for x, y in vals])).magnitudes[:, 0]
    np.testing.assert_allclose(out, np.concatenate([[0.0], 2 * vals[:, 0] - 0.5 * vals[:, 1]]), atol=TOL)
    same = linear_sequence_map_numerical_mlp(sa, sa, Y_SPACE, 1.0, 3.0, "y_h")
    out = same.apply(stream(sa, [{a: x} for x in vals[:, 0]], bos=False)).magnitudes[:, 0]
    np.testing.assert_allclose(out, 4 * vals[:, 0], atol=TOL)
