"""Loss terms on hand-computed tiny cases."""

import math

import compression_fake as fake
import jax.numpy as jnp
import numpy as np
import pytest

from compression.learned.config import LossConfig
from compression.learned.losses import (
    attention_loss,
    compression_loss,
    hidden_loss,
    layer_loss,
    layer_vectors,
    output_balance,
    output_loss,
    position_mask,
    threshold_loss,
    written_margin,
)

IDS = jnp.asarray([[4, 0, 1, 5]])  # BOS, two tokens, PAD
MASK = jnp.asarray([[0.0, 1.0, 1.0, 0.0]])


def test_position_mask_drops_bos_and_pad():
    np.testing.assert_array_equal(position_mask(IDS, bos_id=4, pad_id=5), MASK)


def test_numerical_output_loss_is_masked_mse():
    pred = jnp.asarray([[0.0, 1.0, 3.0, 9.0]])
    target = jnp.asarray([[7.0, 0.0, 1.0, 0.0]])  # BOS and PAD errors must not count
    assert float(output_loss(pred, target, MASK, "numerical")) == pytest.approx((1 + 4) / 2)


def test_categorical_output_loss_against_argmax():
    pred = jnp.asarray([[[5.0, 0.0], [0.0, 0.0], [math.log(3.0), 0.0], [0.0, 9.0]]])
    target = jnp.asarray([[[0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]])
    # position 1: uniform prediction, label 0 -> ln 2; position 2: p(label 1) = 1/4 -> ln 4
    expected = (math.log(2.0) + math.log(4.0)) / 2
    assert float(output_loss(pred, target, MASK, "categorical", "argmax")) == pytest.approx(expected, rel=1e-6)


def test_categorical_output_loss_against_distribution():
    pred = jnp.zeros((1, 4, 2))
    target = jnp.asarray([[[0.0, 0.0], [0.0, 0.0], [math.log(3.0), 0.0], [0.0, 0.0]]])
    # position 1: target (1/2, 1/2) vs uniform -> ln 2; position 2: target (3/4, 1/4) vs uniform -> ln 2
    assert float(output_loss(pred, target, MASK, "categorical", "distribution")) == pytest.approx(math.log(2.0))


def test_layer_loss_sums_layers_of_squared_distance():
    zeros = jnp.zeros((1, 4, 2))
    first = jnp.asarray([[[9.0, 9.0], [1.0, 2.0], [0.0, 1.0], [9.0, 9.0]]])  # 5 and 1 -> mean 3
    second = jnp.asarray([[[0.0, 0.0], [3.0, 0.0], [0.0, 0.0], [5.0, 5.0]]])  # 9 and 0 -> mean 4.5
    assert float(layer_loss([first, second], [zeros, zeros], MASK)) == pytest.approx(7.5)
    assert float(layer_loss([first, second], [zeros, zeros], MASK, "mean")) == pytest.approx(7.5 / 2)
    assert float(layer_loss([second], [zeros], MASK)) == pytest.approx(4.5)


def test_layer_vectors_are_sublayer_outputs_or_residuals():
    r0, r1, r2 = (jnp.full((1, 1, 2), v) for v in (1.0, 3.0, 7.0))
    outputs = layer_vectors([r0, r1, r2], "outputs", include_embedding=False)
    assert [float(v[0, 0, 0]) for v in outputs] == [2.0, 4.0]
    with_embedding = layer_vectors([r0, r1, r2], "outputs", include_embedding=True)
    assert [float(v[0, 0, 0]) for v in with_embedding] == [1.0, 2.0, 4.0]
    residuals = layer_vectors([r0, r1, r2], "residuals", include_embedding=False)
    assert [float(v[0, 0, 0]) for v in residuals] == [3.0, 7.0]


def test_layer_loss_rejects_bad_arguments():
    with pytest.raises(ValueError, match="layer vectors"):
        layer_loss([jnp.zeros((1, 4, 2))], [], MASK)
    with pytest.raises(ValueError, match="layer_reduction"):
        layer_loss([], [], MASK, "max")
    with pytest.raises(ValueError, match="layer_target"):
        layer_vectors([jnp.zeros((1, 4, 2))], "inputs", False)


@pytest.mark.parametrize("categorical", [False, True])
@pytest.mark.parametrize("target", ["outputs", "residuals"])
def test_identity_projection_has_zero_layer_loss(categorical, target):
    model = fake.frozen_model(categorical)
    ids = jnp.asarray([[4, 3, 0, 3, 5, 5], [4, 1, 3, 2, 3, 0]])
    config = LossConfig(layer_target=target, include_embedding=True)
    total, parts = compression_loss(jnp.eye(model.residual_dim), model, ids, config)
    assert float(parts["layer"]) == 0.0
    if not categorical:
        assert float(parts["out"]) == 0.0
    assert float(total) == pytest.approx(float(parts["out"]) + float(parts["layer"]))


def test_loss_weights_scale_the_terms():
    model = fake.frozen_model()
    ids = jnp.asarray([[4, 3, 0, 3, 5, 5]])
    w = jnp.eye(model.residual_dim)[:, :6]
    _, parts = compression_loss(w, model, ids, LossConfig())
    total, _ = compression_loss(w, model, ids, LossConfig(out_weight=2.0, layer_weight=0.5))
    assert float(total) == pytest.approx(2.0 * float(parts["out"]) + 0.5 * float(parts["layer"]), rel=1e-6)


def test_margin_loss_is_zero_once_the_right_logit_wins_by_the_margin():
    target = jnp.asarray([[[0.0, 2.0], [2.0, 0.0], [0.0, 2.0], [0.0, 0.0]]])  # gaps 2 (BOS ignored), 2, 2, none
    # MASK scores positions 1 and 2. The gap: position 1: 1.5 >= 0.5 * 2 -> 0; position 2: -1 ->
    # (1 - (-1)) / 2 = 1; mean 0.5. The threshold (1/2): position 1 keeps its right logit 1.5 above
    # 0.5 + 0.5 * 1.5 -> 0; position 2's right logit -1 is 2.25 short, relative to 1.5 -> 1.5**2.
    pred = jnp.asarray([[[9.0, 0.0], [1.5, 0.0], [0.0, -1.0], [7.0, 0.0]]])
    threshold = 1.5**2 / 2
    assert float(output_loss(pred, target, MASK, "categorical", "margin", 0.5)) == pytest.approx(0.5 + threshold)
    assert float(threshold_loss(pred, target, MASK, 0.5)) == pytest.approx(threshold)
    assert float(output_loss(target, target, MASK, "categorical", "margin", 1.0)) == 0.0
    # the compiled model outputs None everywhere: every logit stays below 0.5 - 0.5 * 0.5; position 1's
    # 1.5 is 1.25 above, relative to 0.5, position 2's largest (0) is below
    ties = jnp.zeros((1, 4, 2))
    assert float(output_loss(jnp.zeros((1, 4, 2)), ties, MASK, "categorical", "margin")) == 0.0
    assert float(output_loss(pred, ties, MASK, "categorical", "margin")) == pytest.approx((1.25 / 0.5) ** 2 / 2)


def test_attention_loss_is_the_kl_of_the_compiled_pattern_from_the_compressed_one():
    compiled = jnp.asarray([[[[1.0, 0.0], [0.5, 0.5]]]])  # [B=1, H=1, T=2, T=2]
    same = attention_loss([compiled], [compiled], jnp.ones((1, 2)))
    assert float(same) == pytest.approx(0.0, abs=1e-7)
    moved = jnp.asarray([[[[0.5, 0.5], [0.5, 0.5]]]])
    # query 0: KL((1, 0) || (1/2, 1/2)) = ln 2; query 1: 0
    assert float(attention_loss([moved], [compiled], jnp.ones((1, 2)))) == pytest.approx(math.log(2.0) / 2)
    assert float(attention_loss([moved], [compiled], jnp.asarray([[0.0, 1.0]]))) == pytest.approx(0.0, abs=1e-7)



def test_hidden_loss_is_zero_while_every_pre_activation_keeps_its_sign_with_the_margin():
    compiled = jnp.asarray([[[2.0, -4.0, 0.0], [1.0, -1.0, 0.0]]])  # [B=1, T=2, units=3]
    mask = jnp.ones((1, 2))
    # 1.0 >= 0.25 * 2 and -2 <= -0.25 * 4; the unit whose compiled value is 0 is not scored
    kept = jnp.asarray([[[1.0, -2.0, 5.0], [0.5, -0.3, -7.0]]])
    assert float(hidden_loss([kept], [compiled], mask, 0.25)) == 0.0
    # position 0: unit 0 at -1 -> ((0.5 - (-1)) / 2)^2 = 0.5625, unit 1 at 0 -> (1 / 4)^2 = 0.0625;
    # position 1 kept; mean over the 2 scored units, then over positions
    flipped = jnp.asarray([[[-1.0, 0.0, 5.0], [0.5, -0.3, 0.0]]])
    assert float(hidden_loss([flipped], [compiled], mask, 0.25)) == pytest.approx((0.5625 + 0.0625) / 2 / 2)
    assert float(hidden_loss([flipped], [compiled], jnp.asarray([[0.0, 1.0]]), 0.25)) == 0.0


def test_output_balance_weighs_each_compiled_output_value_the_same():
    # valid positions 1, 2 (batch 0) and 1, 2 (batch 1): values 0, 0, 0, 1 -> weights 1/3 and 1
    target = jnp.asarray([[[0.0, 1.0], [2.0, 0.0], [2.0, 0.0], [0.0, 0.0]],
                          [[0.0, 1.0], [2.0, 0.0], [0.0, 2.0], [0.0, 0.0]]])
    mask = jnp.concatenate([MASK, MASK])
    weights = output_balance(target, mask) * mask
    np.testing.assert_allclose(np.asarray(weights), [[0, 1 / 3, 1 / 3, 0], [0, 1 / 3, 1, 0]], rtol=1e-6)


def test_written_margin_counts_only_one_hot_deviations_towards_the_other_side():
    # coordinates 0 and 1 one-hot (off, on), 2 numerical (compiled 0.5)
    compiled = jnp.asarray([[[0.0, 1.0, 0.5]]])
    harmless = jnp.asarray([[[-1.0, 3.0, 0.5]]])  # off read negative, on read larger: as compiled
    np.testing.assert_array_equal(np.asarray(written_margin(harmless, compiled, (0, 1))), [[[0.0, 1.0, 0.5]]])
    harmful = jnp.asarray([[[0.25, 0.5, -0.5]]])  # off above 0, on below 1, any numerical move: kept
    np.testing.assert_array_equal(np.asarray(written_margin(harmful, compiled, (0, 1))), np.asarray(harmful))
    mask = jnp.ones((1, 1))
    assert float(layer_loss([written_margin(harmless, compiled, (0, 1))], [compiled], mask)) == 0.0
    assert float(layer_loss([written_margin(harmful, compiled, (0, 1))], [compiled], mask)) == pytest.approx(
        0.25 ** 2 + 0.5 ** 2 + 1.0)
