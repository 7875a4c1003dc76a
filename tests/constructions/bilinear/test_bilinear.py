"""Section 10: bilinear layers, their tensor, folding, exact gates, and the Craft wrapping."""

import numpy as np
import pytest

from constructions.bilinear.gates import (
    AND3,
    MAJORITY3,
    PARITY3,
    exact_boolean,
    exactness_table,
    max_error,
    mobius_coefficients,
    quadratic_form,
    single_neuron_and,
    single_neuron_or,
    single_neuron_xor,
    top_coefficient,
)
from constructions.bilinear.layer import (
    BilinearLayer,
    apply_tensor,
    augment_embedding,
    fold,
    identity_layer,
    interaction_parts,
    pair_coefficients,
    squared_neurons,
    symmetrise,
    with_constant,
)
from constructions.bilinear.to_craft import (
    boolean_gate_mlp,
    mlp_interaction,
    square_as_bilinear,
)
from craft.bases import ONE, BasisDirection, VectorInBasis, VectorSpaceWithBasis, bos_direction
from craft.blocks import MLP
from craft.maps import LinearMap


def random_layer(rng, d_in=5, d_hidden=7):
    return BilinearLayer(*(rng.normal(size=s) for s in
                           [(d_in, d_hidden), (d_in, d_hidden), (d_hidden,), (d_hidden,)]))


def test_tensor_fold_and_symmetric_forms_agree():
    rng = np.random.default_rng(0)
    layer = random_layer(rng)
    h = rng.normal(size=(20, 5))
    direct = layer(h)
    b = layer.tensor()
    assert b.shape == (7, 6, 6)
    assert np.abs(apply_tensor(b, with_constant(h)) - direct).max() < 1e-10
    assert np.abs(apply_tensor(symmetrise(b), with_constant(h)) - direct).max() < 1e-10
    embed, unembed = rng.normal(size=(3, 5)), rng.normal(size=(7, 4))
    x = rng.normal(size=(20, 3))
    folded = fold(b, augment_embedding(embed), unembed)
    assert folded.shape == (4, 4, 4)
    assert np.abs(apply_tensor(folded, with_constant(x)) - layer(x @ embed) @ unembed).max() < 1e-10
    # Without an unembedding the hidden index is kept.
    assert fold(b, augment_embedding(embed)).shape == (7, 4, 4)


def test_interaction_parts_and_pair_coefficients():
    rng = np.random.default_rng(1)
    layer = random_layer(rng, d_in=2, d_hidden=3)
    parts = interaction_parts(layer)
    h = rng.normal(size=(10, 2))
    assert np.abs(parts(h) - layer(h)).max() < 1e-12
    xx, yy, xy, x1, y1, k = pair_coefficients(layer.tensor(), 1, 0, 1, constant=2)
    x, y = h[:, 0], h[:, 1]
    poly = xx * x**2 + yy * y**2 + xy * x * y + x1 * x + y1 * y + k
    assert np.abs(poly - layer(h)[:, 1]).max() < 1e-12


def test_identity_and_squared_neurons():
    rng = np.random.default_rng(2)
    h = rng.normal(size=(6, 4))
    assert np.abs(identity_layer(4)(h) - h).max() < 1e-15
    lin = rng.normal(size=(4, 3))
    assert np.abs(squared_neurons(lin)(h) - (h @ lin) ** 2).max() < 1e-12


def test_all_sixteen_two_input_gates_exact_with_width_at_most_three():
    entries = exactness_table(2)
    assert len(entries) == 16
    assert all(e.exact for e in entries)
    assert max(e.width for e in entries) <= 3
    assert max(e.error for e in entries) < 1e-10


def test_three_input_functions_exact_iff_top_coefficient_vanishes():
    entries = exactness_table(3)
    assert sum(e.exact for e in entries) == 70
    for e in entries:
        assert e.exact == (abs(e.top_coefficient) < 1e-12)
        assert (e.fit_residual < 1e-9) == e.exact
    for table in (AND3, PARITY3, MAJORITY3):
        assert abs(top_coefficient(table)) > 0.5
        with pytest.raises(ValueError, match="degree > 2"):
            quadratic_form(table)


def test_named_single_neuron_forms():
    assert max_error(single_neuron_and(), (0, 0, 0, 1)) == 0.0
    assert max_error(single_neuron_xor(), (0, 1, 1, 0)) == 0.0
    assert max_error(single_neuron_or(), (0, 1, 1, 1)) == 0.0
    assert single_neuron_xor().layer.b.tolist() == [0.0]


def test_mobius_coefficients_of_or():
    coeffs = mobius_coefficients((0, 1, 1, 1))
    assert coeffs[frozenset()] == 0 and coeffs[frozenset({0})] == 1
    assert coeffs[frozenset({0, 1})] == -1


X, Y, OUT = BasisDirection("x"), BasisDirection("y"), BasisDirection("gate")
BOS = bos_direction()


def _stream(bits):
    """Residual stream: BOS position, then one position per (x, y) pair."""
    space = VectorSpaceWithBasis((X, Y, ONE, BOS))
    rows = [[0.0, 0.0, 1.0, 1.0]] + [[x, y, 1.0, 0.0] for x, y in bits]
    return VectorInBasis(space.basis, np.array(rows))


@pytest.mark.parametrize("index", range(16))
def test_craft_gate_mlp_exact_and_zero_at_bos(index):
    table = tuple((index >> (3 - i)) & 1 for i in range(4))
    mlp = boolean_gate_mlp(table, [X, Y], OUT, ONE, hidden_name="gate_hidden", bos_direction=BOS)
    assert mlp.activation == "bilinear" and mlp.hidden_space.num_dims <= 6
    bits = [(0, 0), (0, 1), (1, 0), (1, 1)]
    out = mlp.apply(_stream(bits)).magnitude(OUT)
    assert abs(out[0]) < 1e-12
    assert np.abs(out[1:] - np.array(table)).max() < 1e-12


def test_craft_interaction_tensor_matches_block():
    gate = exact_boolean((0, 1, 1, 0))
    mlp = boolean_gate_mlp((0, 1, 1, 0), [X, Y], OUT, ONE, hidden_name="h")
    inter = mlp_interaction(mlp)
    assert inter.output_basis == (OUT,)
    stream = _stream([(0, 1), (1, 1), (0.3, -2.0)])
    x = stream.project(VectorSpaceWithBasis(inter.input_basis)).magnitudes
    assert np.abs(inter.evaluate(x)[:, 0] - mlp.apply(stream).magnitude(OUT)).max() < 1e-12
    sym = inter.symmetric()
    assert abs(sym.entry(OUT, X, Y) - sym.entry(OUT, Y, X)) < 1e-15
    # XOR = x + y - 2xy: the symmetric x-y interaction is -1 (i.e. -2xy split in two halves).
    assert abs(sym.entry(OUT, X, Y) + 1.0) < 1e-12
    hidden = mlp_interaction(mlp, fold_readout=False)
    assert hidden.tensor.shape[0] == gate.width


def test_square_mlp_is_a_bilinear_mlp():
    rng = np.random.default_rng(3)
    space = VectorSpaceWithBasis((X, Y, ONE))
    hidden = VectorSpaceWithBasis.from_values("sq", range(3))
    out = VectorSpaceWithBasis((OUT,))
    mlp = MLP(LinearMap(space, hidden, rng.normal(size=(3, 3))),
              LinearMap(hidden, out, rng.normal(size=(3, 1))), "square")
    stream = VectorInBasis(space.basis, rng.normal(size=(4, 3)))
    as_bilinear = square_as_bilinear(mlp)
    assert as_bilinear.apply(stream).allclose(mlp.apply(stream), atol=1e-12)
    inter = mlp_interaction(mlp)
    assert np.abs(inter.evaluate(stream.magnitudes)[:, 0] - mlp.apply(stream).magnitude(OUT)).max() < 1e-12
